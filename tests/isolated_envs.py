"""Virtual environments of their own for tests whose packages cannot share the dev venv (pins that conflict).

Each environment is one pinned requirements file, ``tests/envs/<name>.txt``. It is built once into a cache
folder (``AGENTDIAG_TEST_ENVS``, else ``~/.cache/otel-agentdiag/test-envs``) named by the file's digest and the
interpreter's version, so editing the file builds a new one, and later runs reuse it. otel-agentdiag itself is not
installed there: a test runs its script with the checkout on ``PYTHONPATH`` (:func:`run_in`), and the
requirements file lists the runtime dependencies the script needs (``opentelemetry-sdk`` and the rest).

Building needs the package index (CI has it); a build that fails fails the test with pip's last lines.

Zero-code in such an environment: :func:`entry_points_folder` writes a ``.dist-info`` holding this checkout's
entry points, so that ``opentelemetry-instrument`` there finds our distro, configurator and instrumentors.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the dev venv is 3.11+
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
ENVS = ROOT / "tests" / "envs"
_CACHE_VARIABLE = "AGENTDIAG_TEST_ENVS"


def _cache_root() -> Path:
    chosen = os.environ.get(_CACHE_VARIABLE)
    return Path(chosen) if chosen else Path.home() / ".cache" / "otel-agentdiag" / "test-envs"


def env_python(name: str) -> Path:
    """The interpreter of the environment ``tests/envs/<name>.txt`` describes, built on first use."""
    requirements = ENVS / f"{name}.txt"
    text = requirements.read_bytes()
    tag = hashlib.sha256(text + sys.version.encode()).hexdigest()[:16]
    root = _cache_root()
    root.mkdir(parents=True, exist_ok=True)
    target = root / f"{name}-{tag}"
    python = target / "bin" / "python"
    ready = target / ".ready"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder at a time (pytest-xdist, two checkouts)
        if ready.exists():
            return python
        shutil.rmtree(target, ignore_errors=True)
        venv.EnvBuilder(with_pip=True, clear=True).create(target)
        done = subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "-r", str(requirements)],
            capture_output=True,
            text=True,
            timeout=1800,
        )
        if done.returncode != 0:
            shutil.rmtree(target, ignore_errors=True)
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
            pytest.fail(f"could not build the test environment {name!r} from {requirements}:\n{tail}", pytrace=False)
        ready.write_text("ok\n")
    return python


def run_in(
    name: str, args: list[str], *, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run ``python ARGS`` in environment ``name`` with this checkout on ``PYTHONPATH`` (so the script imports
    this otel-agentdiag), ``env`` added to a copy of this process's environment. A ``PYTHONPATH`` in ``env`` comes
    first: a folder of metadata a test writes (a ``.dist-info`` with this checkout's entry points) must win over
    the ``.egg-info`` an editable install leaves in the checkout, which may be older than ``pyproject.toml``."""
    python = env_python(name)
    child = dict(os.environ)
    child.pop("PYTHONPATH", None)  # this process's path is the dev venv's business, not the environment's
    child.update(env or {})
    child["PYTHONPATH"] = os.pathsep.join([*filter(None, [child.get("PYTHONPATH")]), str(ROOT)])
    return subprocess.run([str(python), *args], capture_output=True, text=True, timeout=timeout, env=child, cwd=ROOT)


def entry_points_folder(folder: Path) -> Path:
    """``folder``, made to hold an ``otel_agentdiag-0.0.0.dist-info`` with this checkout's entry points (read from
    ``pyproject.toml``): with ``folder`` first on ``PYTHONPATH`` (``run_in(env={"PYTHONPATH": ...})``),
    ``importlib.metadata`` finds them, as ``opentelemetry-instrument`` does, though the checkout is not installed."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    info = folder / "otel_agentdiag-0.0.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: otel-agentdiag\nVersion: 0.0.0\n")
    groups = [
        f"[{group}]\n" + "".join(f"{name} = {target}\n" for name, target in points.items())
        for group, points in project["entry-points"].items()
    ]
    (info / "entry_points.txt").write_text("\n".join(groups))
    return folder


def instrument_args(name: str, args: list[str]) -> list[str]:
    """The arguments of :func:`run_in` that run ``opentelemetry-instrument python ARGS`` with environment
    ``name``'s interpreter (its console script may not exist: the launcher is imported instead)."""
    launcher = "from opentelemetry.instrumentation.auto_instrumentation import run; run()"
    return ["-c", launcher, str(env_python(name)), *args]
