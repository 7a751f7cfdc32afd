"""Build the real back ends from this repository's own files: the Collector, Jaeger and Prometheus, pinned.

    python collector-config/build_backends.py                 # all three; prints each binary's path
    python collector-config/build_backends.py collector       # or jaeger, prometheus

Each binary is built with Go from the Go module proxy (nothing is downloaded from anywhere else) into a cache
folder keyed by component and version, ``~/.cache/otel-agentdiag/backends/<name>-<version>/`` (or under
``$AGENTDIAG_BACKENDS_CACHE``), so a second run builds nothing. Builds run under ``nice -n 10`` and hold a lock
per component, so two test runs that start at once build it once.

- ``collector``: the OpenTelemetry Collector with exactly the components ``otelcol.yaml`` uses, built by the
  Collector's own builder from ``builder-config.yaml`` (the manifest's content is part of the cache key).
- ``jaeger``: ``github.com/jaegertracing/jaeger/cmd/jaeger`` v1.75.0 (Jaeger v2's single binary; the tests run
  it with in-memory storage).
- ``prometheus``: ``github.com/prometheus/prometheus/cmd/prometheus`` v0.314.0, i.e. Prometheus 3.14.0, the
  release docker/docker-compose.yml pins (built without its web UI's assets: the HTTP API is complete).

Standard library only: the tests (tests/backends/) import it, CI runs it as a script.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

CACHE_ENV = "AGENTDIAG_BACKENDS_CACHE"
"""Overrides the cache folder (default ``~/.cache/otel-agentdiag/backends``)."""

GO_ENV = "AGENTDIAG_GO"
"""The ``go`` command to build with (default: ``go`` on PATH, else /usr/local/go/bin/go)."""

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "builder-config.yaml"

COLLECTOR_RELEASE = "v0.161.0"
"""The builder's release: the same as every Collector module in builder-config.yaml."""

JAEGER_MODULE = "github.com/jaegertracing/jaeger"
JAEGER_VERSION = "v1.75.0"
PROMETHEUS_MODULE = "github.com/prometheus/prometheus"
PROMETHEUS_VERSION = "v0.314.0"
"""Prometheus 3.14.0: its Go module carries the release as v0.<major><minor>.<patch>."""

NAMES = ("collector", "jaeger", "prometheus")


class BuildError(RuntimeError):
    """A back end could not be built; the message names the step and ends with the tool's last output."""


@dataclass(frozen=True)
class Backend:
    """One binary: where it is cached and how it is built."""

    name: str
    version: str
    binary: str

    @property
    def folder(self) -> Path:
        """The cache folder for this component and version."""
        return cache_root() / f"{self.name}-{self.version}"

    @property
    def path(self) -> Path:
        """The binary's path once built."""
        return self.folder / "bin" / self.binary


def cache_root() -> Path:
    """The folder holding one sub-folder per built component and version."""
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "otel-agentdiag" / "backends"


def go_command() -> str | None:
    """The ``go`` executable, or None where Go is absent."""
    configured = os.environ.get(GO_ENV)
    if configured:
        return configured if Path(configured).is_file() else shutil.which(configured)
    found = shutil.which("go")
    if found:
        return found
    fallback = Path("/usr/local/go/bin/go")
    return str(fallback) if fallback.is_file() else None


def _manifest_key() -> str:
    return hashlib.sha256(MANIFEST.read_bytes()).hexdigest()[:12]


def backend(name: str) -> Backend:
    """The pinned description of one back end by name (``collector``, ``jaeger`` or ``prometheus``)."""
    if name == "collector":
        return Backend("otelcol-agentdiag", f"{COLLECTOR_RELEASE}-{_manifest_key()}", "otelcol-agentdiag")
    if name == "jaeger":
        return Backend("jaeger", JAEGER_VERSION, "jaeger")
    if name == "prometheus":
        return Backend("prometheus", PROMETHEUS_VERSION, "prometheus")
    raise ValueError(f"unknown back end {name!r}; expected one of {', '.join(NAMES)}")


def cached(name: str) -> Path | None:
    """The cached binary for ``name`` if it was built, else None (never builds)."""
    path = backend(name).path
    return path if path.is_file() and os.access(path, os.X_OK) else None


def ensure(name: str) -> Path:
    """The binary for ``name``: the cached one, or built now (raises BuildError, or RuntimeError without Go)."""
    spec = backend(name)
    if cached(name):
        return spec.path
    go = go_command()
    if go is None:
        raise RuntimeError("Go is not installed: the back ends are built from the Go module proxy")
    spec.folder.parent.mkdir(parents=True, exist_ok=True)
    with _lock(spec.folder.parent / f".{spec.name}-{spec.version}.lock"):
        if cached(name):  # another process built it while this one waited
            return spec.path
        for stale in spec.folder.parent.glob(f".{spec.name}-{spec.version}-*"):  # a build that was killed
            shutil.rmtree(stale, ignore_errors=True)
        work = Path(tempfile.mkdtemp(prefix=f".{spec.name}-{spec.version}-", dir=spec.folder.parent))
        try:
            started = time.monotonic()
            built = _BUILDERS[name](go, work)
            (work / "bin").mkdir(exist_ok=True)
            target = work / "bin" / spec.binary
            if built != target:
                shutil.move(str(built), target)
            (work / "BUILD_SECONDS").write_text(f"{time.monotonic() - started:.0f}\n")
            if spec.folder.exists():
                shutil.rmtree(spec.folder)
            work.rename(spec.folder)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return spec.path


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _go_env(work: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "CGO_ENABLED": "0",
            "GOFLAGS": "-buildvcs=false -mod=mod",
            # Fail rather than fetch another toolchain: the pins above build with the machine's Go.
            "GOTOOLCHAIN": env.get("GOTOOLCHAIN", "local"),
            "GOWORK": "off",
        }
    )
    env.setdefault("GOPATH", str(Path.home() / "go"))
    env.setdefault("GOCACHE", str(Path.home() / ".cache" / "go-build"))
    env["TMPDIR"] = str(work)
    return env


def _run(step: str, command: list[str], cwd: Path, env: dict[str, str]) -> None:
    niced = ["nice", "-n", "10", *command] if shutil.which("nice") else command
    log = cwd / "build.log"
    with log.open("ab") as out:
        out.write(f"$ {' '.join(command)}\n".encode())
        out.flush()
        result = subprocess.run(niced, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, check=False)
    if result.returncode != 0:
        tail = log.read_text(errors="replace")[-3000:]
        raise BuildError(f"{step} failed (exit {result.returncode}):\n{tail}")


def _build_collector(go: str, work: Path) -> Path:
    env = _go_env(work)
    env["GOBIN"] = str(work / "tools")
    _run(
        "installing the Collector builder",
        [go, "install", f"go.opentelemetry.io/collector/cmd/builder@{COLLECTOR_RELEASE}"],
        work,
        env,
    )
    env["PATH"] = f"{Path(go).parent}{os.pathsep}{env.get('PATH', '')}"
    _run("building the Collector", [str(work / "tools" / "builder"), f"--config={MANIFEST}"], work, env)
    return work / "otelcol-agentdiag" / "otelcol-agentdiag"


def _build_module_program(
    go: str, work: Path, module: str, version: str, package: str, binary: str, replaces: tuple[str, ...] = ()
) -> Path:
    """``package`` built from a throw-away main module that requires ``module@version`` (and repeats the
    ``replace`` directives of that module's own go.mod, which Go applies only in the main module)."""
    env = _go_env(work)
    source = work / "src"
    source.mkdir()
    _run("creating the build module", [go, "mod", "init", f"agentdiag.local/build/{binary}"], source, env)
    for replace in replaces:
        _run("repeating the upstream replace directive", [go, "mod", "edit", f"-replace={replace}"], source, env)
    _run(f"fetching {module}@{version}", [go, "get", f"{package}@{version}"], source, env)
    out = work / "bin" / binary
    _run(f"building {package}", [go, "build", "-trimpath", "-ldflags=-s -w", "-o", str(out), package], source, env)
    return out


def _build_jaeger(go: str, work: Path) -> Path:
    replaces = ("github.com/Shopify/sarama=github.com/Shopify/sarama@v1.33.0",)  # as in Jaeger v1.75.0's go.mod
    package = f"{JAEGER_MODULE}/cmd/jaeger"
    return _build_module_program(go, work, JAEGER_MODULE, JAEGER_VERSION, package, "jaeger", replaces)


def _build_prometheus(go: str, work: Path) -> Path:
    package = f"{PROMETHEUS_MODULE}/cmd/prometheus"
    replaces = ("cloud.google.com/go=cloud.google.com/go@v0.123.0",)  # as in Prometheus 3.14.0's go.mod
    return _build_module_program(go, work, PROMETHEUS_MODULE, PROMETHEUS_VERSION, package, "prometheus", replaces)


_BUILDERS = {"collector": _build_collector, "jaeger": _build_jaeger, "prometheus": _build_prometheus}


def main(argv: list[str] | None = None) -> int:
    """Build (or find cached) the named back ends and print one ``name path seconds`` line each."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # No `choices=` here: argparse refuses an empty list against choices for nargs="*" (no name: every back end).
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"one of {', '.join(NAMES)} (default: all)")
    args = parser.parse_args(argv)
    unknown = [name for name in args.names if name not in NAMES]
    if unknown:
        parser.error(f"unknown back end {unknown[0]!r} (choose from {', '.join(NAMES)})")
    if go_command() is None:
        print("build_backends: Go is not installed; nothing built", file=sys.stderr)
        return 0
    status = 0
    for name in args.names or NAMES:
        started = time.monotonic()
        try:
            path = ensure(name)
        except BuildError as error:
            print(f"build_backends: {name}: {error}", file=sys.stderr)
            status = 1
            continue
        print(f"{name} {path} {time.monotonic() - started:.0f}s")
    return status


if __name__ == "__main__":
    sys.exit(main())
