"""Hostile input for ``agentdiag``: hypothesis strategies (CLI arguments, policy files, OTLP-JSON ingest files,
damaged stores) and the oracle every case is judged by.

The oracle (:func:`check_outcome`): the exit code is one the command documents, nothing raised out of the
command (no traceback), an exit 2 is exactly one ``agentdiag: error:`` line on stderr, and the store is left
byte for byte as it was unless the command writes and succeeded (:class:`StoreSnapshot`).
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import os
import shutil
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result
from hypothesis import strategies as st

from otel_agentdiag.cli import cli

# -- the commands and what they may exit with ----------------------------------------------------------------------
READERS = ("traces", "show", "sessions", "receipt", "status", "doctor", "export", "policy", "push")
"""Commands that must never change the store (export writes only its --out; push only marks on success, and every
endpoint here refuses)."""
WRITERS = ("ingest", "prune", "clear", "demo")
EXIT_CODES: dict[str, frozenset[int]] = {
    **{name: frozenset({0, 2}) for name in READERS},
    "push": frozenset({0, 1, 2}),  # 1: the endpoint did not take a batch
    "ingest": frozenset({0, 1, 2}),  # 1: some lines rejected (and recorded)
    # 1: deleted, but another process kept the file from being rewritten without the deleted rows
    "prune": frozenset({0, 1, 2}),
    "clear": frozenset({0, 1, 2}),
    "demo": frozenset({0, 2}),
}
UNKNOWN_COMMAND_EXIT = frozenset({2})

SUFFIXES = ("", "-wal", "-shm", "-journal")


def invoke(args: Sequence[str | os.PathLike[str]]) -> Result:
    """Run ``agentdiag`` in-process; exceptions are caught so that the oracle can report them."""
    return CliRunner().invoke(cli, [os.fspath(a) for a in args], catch_exceptions=True)


def command_of(args: Sequence[str]) -> str:
    return args[0] if args else ""


def allowed_exit_codes(args: Sequence[str]) -> frozenset[int]:
    if any(a in ("--help", "-h", "--version") for a in args):
        return frozenset({0, 2})  # --help wins unless parsing failed on an earlier token
    return EXIT_CODES.get(command_of(args), UNKNOWN_COMMAND_EXIT)


def check_outcome(result: Result, allowed: frozenset[int], what: object) -> None:
    """Exit code documented, no traceback, and an error is exactly one readable line on stderr."""
    exc = result.exception
    if exc is not None and not isinstance(exc, SystemExit):
        raise AssertionError(f"{what!r}: raised {type(exc).__name__}: {exc}") from exc
    output = result.stdout + result.stderr
    assert "Traceback" not in output, f"{what!r}: {output[-2000:]}"
    assert result.exit_code in allowed, f"{what!r}: exit {result.exit_code}: {output[-2000:]}"
    if result.exit_code == 2:
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("agentdiag: error:"), f"{what!r}: {result.stderr[-2000:]}"
        assert lines[0].isprintable(), f"{what!r}: {lines[0]!r}"


# -- the store on disk ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StoreSnapshot:
    """What a store is on disk: a digest of each of its files (None: absent), and the database file's mode."""

    files: tuple[str | None, ...]
    mode: int | None

    @classmethod
    def of(cls, store: Path) -> StoreSnapshot:
        files = []
        for suffix in SUFFIXES:
            part = Path(f"{store}{suffix}")
            files.append(hashlib.sha256(part.read_bytes()).hexdigest() if part.is_file() else None)
        mode = store.stat().st_mode & 0o7777 if store.is_file() else None
        return cls(tuple(files), mode)

    def differences(self, other: StoreSnapshot) -> list[str]:
        out = [f"{suffix or 'db'}" for suffix, a, b in zip(SUFFIXES, self.files, other.files, strict=True) if a != b]
        if self.mode != other.mode:
            out.append(f"mode {self.mode} -> {other.mode}")
        return out


def copy_store(source_dir: Path, target_dir: Path) -> Path:
    """A private copy of a store folder (database and key file); returns the database path."""
    target_dir.mkdir(parents=True, exist_ok=True)
    for item in source_dir.iterdir():
        if item.is_file():
            shutil.copy2(item, target_dir / item.name)
    return target_dir / "traces.db"


def integrity_ok(store: Path) -> bool:
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        return bool(conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok")
    finally:
        conn.close()


def identity_rows(store: Path) -> list[tuple[str, str, int, int, int, int]]:
    """Per (observer, session): observed, accepted, sum(rejected), sum(dropped)."""
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT observer, session, observed, accepted, rejected, dropped FROM session_stats")
        out = []
        for observer, session, observed, accepted, rejected, dropped in rows:
            out.append(
                (
                    observer,
                    session,
                    observed,
                    accepted,
                    sum(json.loads(rejected).values()),
                    sum(json.loads(dropped).values()),
                )
            )
        return out
    finally:
        conn.close()


# -- text and argument strategies ----------------------------------------------------------------------------------
HUGE = "x" * 200_000
CONTROL = "".join(chr(c) for c in (*range(1, 32), 127))


def _undecodable(data: bytes) -> str:
    """Bytes that are not UTF-8 as the interpreter hands them to us from argv (PEP 383 surrogates)."""
    return data.decode("utf-8", "surrogateescape")


def argv_text() -> st.SearchStrategy[str]:
    """A value argv can carry (no NUL): control characters, undecodable bytes, unicode, huge, numeric-ish."""
    return st.one_of(
        st.text(alphabet=st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=40),
        st.text(alphabet=CONTROL + "ab-=:./%\\", max_size=20),
        st.binary(max_size=16).filter(lambda b: b"\x00" not in b).map(_undecodable),
        st.sampled_from(
            [
                "",
                " ",
                "-",
                "--",
                "-1",
                "0",
                "1e309",
                "nan",
                "inf",
                "-inf",
                "none",
                "NONE",
                "9" * 40,
                "2025-01-31T12:00:00",
                "2025-01-31T12:00:00Z",
                "9999-12-31T23:59:59+14:00",
                "0001-01-01T00:00:00-12:00",
                "hmac-sha256:",
                "hmac-sha256:00000000:",
                "sha256:" + "0" * 64,
                "\u202e\u200b",
                "\U0001f600" * 5,
                HUGE,
            ]
        ),
    )


@dataclass(frozen=True)
class ArgPool:
    """Paths and ids of the test's store, so fuzzed arguments sometimes name real things."""

    store: Path
    folder: Path
    trace_id: str
    session: str
    ingest_file: Path
    policy_file: Path
    fifo: Path
    out_dir: Path

    def values(self) -> st.SearchStrategy[str]:
        real = [
            str(self.store),
            str(self.folder),
            str(self.folder / "hash.key"),
            f"{self.store}-wal",
            str(self.folder / "missing" / "traces.db"),
            str(self.ingest_file),
            str(self.policy_file),
            str(self.fifo),
            str(self.out_dir / "out.json"),
            str(self.out_dir / _undecodable(b"\xff\xfe.json")),
            self.trace_id,
            self.trace_id[:6],
            self.trace_id.upper(),
            self.session,
            self.session[:20],
            self.session.rsplit(":", 1)[-1][:8],
            "strict",
            "local",
            "text",
            "json",
            "bundle",
            "otlp-json",
            "jaeger-json",
            "http/protobuf",
            "grpc",
        ]
        return st.one_of(st.sampled_from(real), argv_text())


OPTIONS: dict[str, tuple[str, ...]] = {
    "traces": ("--store", "--format", "--limit"),
    "show": ("--store", "--format", "--content"),
    "sessions": ("--store", "--format"),
    "receipt": ("--store", "--format", "--session"),
    "status": ("--store", "--format", "--session", "--as-of", "--stall-threshold", "--with-receipt"),
    "doctor": ("--store", "--format", "--otlp-endpoint", "--local-policy", "--otlp-policy"),
    "export": ("--store", "--format", "--out", "--session"),
    "policy": ("--policy", "--collector"),
    "push": ("--store", "--format", "--protocol", "--session", "--since", "--batch-size"),
    "ingest": ("--store", "--format", "--trust-names", "--max-session-age"),
    "prune": ("--store", "--format", "--max-session-spans", "--max-session-bytes", "--max-session-age"),
    "clear": ("--store", "--format", "--session", "--yes"),
    "demo": ("--store", "--capture-content"),
}
FLAGS = frozenset({"--content", "--with-receipt", "--collector", "--trust-names", "--yes", "--capture-content"})
ENDPOINTS = (
    "http://127.0.0.1:9",
    "http://user:secret@127.0.0.1:9/v1?token=x#f",
    "127.0.0.1:9",
    "grpc://127.0.0.1:9",
    "ftp://127.0.0.1:9",
    "http://127.0.0.1:99999",
    "http://[::1",
    "",
    "\x1b[31m",
)


@st.composite
def cli_argv(draw: st.DrawFn, pool: ArgPool) -> list[str]:
    """A command (sometimes an unknown one) and a jumble of its options, unknown options and positionals."""
    command = draw(st.sampled_from([*OPTIONS, *OPTIONS, "bogus", "", "--store"]))
    options = OPTIONS.get(command, ("--store",))
    values = pool.values()
    tokens: list[str] = [command] if command else []
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["option", "option", "option", "positional", "unknown", "eq"]))
        if kind == "option":
            option = draw(st.sampled_from(options))
            tokens.append(option)
            if option not in FLAGS:
                tokens.append(draw(values))
        elif kind == "eq":
            tokens.append(f"{draw(st.sampled_from(options))}={draw(values)}")
        elif kind == "positional":
            tokens.append(draw(values))
        else:
            tokens.append(draw(st.sampled_from(["--bogus", "-x", "--store=", "--help", "--format=xml", "-"])))
    if command == "push":
        # Only refusing local endpoints, and a short deadline: the fuzz never leaves the machine or waits long.
        tokens += ["--endpoint", draw(st.sampled_from(ENDPOINTS)), "--timeout", "0.2"]
    return tokens


# -- policy files ---------------------------------------------------------------------------------------------------
def _toml_key(key: str) -> str:
    return json.dumps(key)


def toml_value(value: Any) -> str:
    """A TOML inline value (JSON's string escapes are TOML's; lone surrogates make the document invalid)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(type(value))


def toml_document(data: dict[str, Any]) -> str:
    return "".join(f"{_toml_key(key)} = {toml_value(value)}\n" for key, value in data.items())


SETTINGS = (
    "name",
    "extends",
    "allowed_keys",
    "allowed_span_names",
    "allowed_events",
    "resource_keys",
    "scope_keys",
    "blocked_values",
    "hash_function",
    "summary",
    "exception_fingerprint",
    "on_error",
)
RULE_TYPES = ("enum", "bool", "int", "float", "token", "string_array", "scalar", "hashed_id", "registered_name")
RULE_FIELDS = ("type", "values", "min", "max", "pattern", "max_length", "max_items", "id_kind", "name_kind")
ATTRIBUTE_KEYS = ("gen_ai.tool.name", "gen_ai.usage.input_tokens", "agentdiag.kind", "custom.key", "", "a\x01b")
# Regular expressions that are cheap on any input (no nested quantifiers): the fuzz is about types, not ReDoS.
PATTERNS = ("[a-z]+", "^x$", "(", "[", "a{2,1}", "\\", ".*", "(?P<n>a)", "[\ud800]")


def _scalars() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.booleans(),
        st.integers(min_value=-(2**63), max_value=2**63 - 1),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=20),
        st.sampled_from([*RULE_TYPES, *PATTERNS, "strict", "local", "none", "tombstone", "drop", "info", "sha256"]),
    )


def _values(depth: int = 3) -> st.SearchStrategy[Any]:
    return st.recursive(
        _scalars(),
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.dictionaries(st.sampled_from([*RULE_FIELDS, *ATTRIBUTE_KEYS]), inner, max_size=4),
        ),
        max_leaves=8,
    )


def _rule() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.just(False),
        _values(),
        st.fixed_dictionaries(
            {"type": st.sampled_from(RULE_TYPES)},
            optional={field: _values() for field in RULE_FIELDS[1:]},
        ),
    )


@st.composite
def policy_file(draw: st.DrawFn) -> bytes:
    """The bytes of a policy file: mostly-plausible settings with wrong types and unknown keys, then perhaps
    broken (invalid UTF-8, truncated, deeply nested, huge)."""
    data: dict[str, Any] = {}
    for setting in draw(st.lists(st.sampled_from([*SETTINGS, "unknown_setting", "Name"]), max_size=6, unique=True)):
        if setting in ("allowed_keys", "resource_keys", "scope_keys"):
            data[setting] = draw(
                st.one_of(st.dictionaries(st.sampled_from(ATTRIBUTE_KEYS), _rule(), max_size=4), _values())
            )
        elif setting == "blocked_values":
            data[setting] = draw(st.one_of(st.lists(st.sampled_from(PATTERNS), max_size=3), _values()))
        else:
            data[setting] = draw(_values())
    try:
        text = toml_document(data)
    except TypeError:  # pragma: no cover - every drawn value is a TOML type
        text = ""
    raw = text.encode("utf-8", "surrogatepass")  # a lone surrogate stays: invalid UTF-8 in the file
    damage = draw(st.sampled_from(["none", "none", "truncate", "bad_utf8", "deep_array", "deep_table", "huge"]))
    if damage == "truncate" and raw:
        raw = raw[: draw(st.integers(0, len(raw) - 1))]
    elif damage == "bad_utf8":
        at = draw(st.integers(0, len(raw)))
        raw = raw[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80\x80"])) + raw[at:]
    elif damage == "deep_array":
        depth = draw(st.sampled_from([50, 400, 5000]))
        raw += b"deep = " + b"[" * depth + b"]" * depth + b"\n"
    elif damage == "deep_table":
        depth = draw(st.sampled_from([50, 400, 5000]))
        raw += b"deep = " + b"{a = " * depth + b"1" + b"}" * depth + b"\n"
    elif damage == "huge":
        raw += b'name = "' + b"n" * 1_000_000 + b'"\n'
    return raw


# -- OTLP-JSON ingest files -----------------------------------------------------------------------------------------
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"


def span_json(index: int, **changes: Any) -> dict[str, Any]:
    span: dict[str, Any] = {
        "traceId": TRACE_ID,
        "spanId": f"{index + 1:016x}",
        "name": f"span-{index}",
        "kind": 1,
        "startTimeUnixNano": str(1_700_000_000_000_000_000 + index),
        "endTimeUnixNano": str(1_700_000_000_100_000_000 + index),
        "attributes": [
            {"key": "gen_ai.conversation.id", "value": {"stringValue": f"conversation-{index % 3}"}},
            {"key": "gen_ai.tool.name", "value": {"stringValue": "lookup"}},
        ],
        "status": {"code": 1},
    }
    span.update(changes)
    return span


def request_json(spans: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "hostile"}}]},
                "scopeSpans": [{"scope": {"name": "hostile-test", "version": "1"}, "spans": spans}],
            }
        ]
    }


def _deep(depth: int, kind: str) -> Any:
    value: Any = {"stringValue": "leaf"}
    for _ in range(depth):
        if kind == "kvlist":
            value = {"kvlistValue": {"values": [{"key": "k", "value": value}]}}
        elif kind == "array":
            value = {"arrayValue": {"values": [value]}}
        else:
            value = [value]
    return value


HOSTILE_VALUES: tuple[Any, ...] = (
    None,
    True,
    0,
    -1,
    2**64,
    "9" * 40,
    -1.5,
    1e308,
    "",
    "\ud800",
    "\udcff",
    "a\x00b",
    "x" * 100_000,
    [],
    {},
    [None],
    {"stringValue": 5},
    {"intValue": "not a number"},
    {"doubleValue": "Infinity"},
    {"bytesValue": "!!!"},
    {"kvlistValue": {"values": "x"}},
    "0" * 32,
    "0" * 16,
    "ZZ" * 8,
    TRACE_ID.upper(),
)


def _mutate(document: Any, path: list[Any], value: Any) -> None:
    """Replace what ``path`` names in ``document`` (keys or list indexes) with a copy of ``value``.

    A copy: the hostile values are shared module constants, and a later mutation may land inside one that an
    earlier one put in place. Without the copy, ``[None]`` could be put inside itself (a cycle that no JSON
    encoder, nor ``_paths``, can walk) and the constant would be changed for every example after it.
    """
    target = document
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = copy.deepcopy(value)


def _paths(document: Any, prefix: list[Any] | None = None) -> list[list[Any]]:
    prefix = prefix or []
    found: list[list[Any]] = []
    if isinstance(document, dict):
        for key, value in document.items():
            found.append([*prefix, key])
            found.extend(_paths(value, [*prefix, key]))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            found.append([*prefix, index])
            found.extend(_paths(value, [*prefix, index]))
    return found


@st.composite
def otlp_line(draw: st.DrawFn) -> bytes:
    """One line of an ingest file: a valid request, a mutated one, or something that is not a request at all."""
    spans = [span_json(i) for i in range(draw(st.integers(1, 4)))]
    if draw(st.booleans()):
        spans.append(dict(spans[0]))  # a duplicate span id within the request
    document: Any = request_json(spans)
    kind = draw(
        st.sampled_from(["valid", "mutate", "mutate", "mutate", "deep", "array", "truncated", "bad_utf8", "junk"])
    )
    if kind == "mutate":
        for _ in range(draw(st.integers(1, 3))):
            paths = _paths(document)
            path = draw(st.sampled_from(paths))
            _mutate(document, path, draw(st.sampled_from(HOSTILE_VALUES)))
    elif kind == "deep":
        depth = draw(st.sampled_from([10, 90, 200, 3000]))
        shape = draw(st.sampled_from(["kvlist", "array", "json"]))
        if shape == "json":
            document["resourceSpans"][0]["deep"] = _deep(depth, "json")
        else:
            spans[0]["attributes"].append({"key": "deep", "value": _deep(depth, shape)})
    elif kind == "array":
        document = [document, draw(st.sampled_from(HOSTILE_VALUES)), request_json([span_json(9)])]
    try:
        raw = json.dumps(document, allow_nan=True).encode("utf-8")  # \ud800 stays a JSON escape
    except (RecursionError, ValueError):
        raw = b'{"resourceSpans": ['
    if kind == "truncated":
        raw = raw[: draw(st.integers(0, len(raw) - 1))]
    elif kind == "bad_utf8":
        at = draw(st.integers(0, len(raw)))
        raw = raw[:at] + draw(st.sampled_from([b"\xff", b"\xc3(", b"\xed\xa0\x80"])) + raw[at:]
    elif kind == "junk":
        raw = draw(st.binary(max_size=64)).replace(b"\n", b" ")
    return raw


def ingest_file() -> st.SearchStrategy[bytes]:
    """A whole ingest file: lines joined by newlines, sometimes blank lines, sometimes one line twice."""
    return st.lists(otlp_line(), min_size=1, max_size=4).flatmap(
        lambda lines: st.sampled_from(["\n", "\n\n", "\r\n"]).map(
            lambda sep: sep.encode().join(lines + lines[:1] if len(lines) == 2 else lines)
        )
    )


# -- damaged stores -------------------------------------------------------------------------------------------------
Damage = Callable[[Path], None]


@st.composite
def store_damage(draw: st.DrawFn, size: int) -> tuple[str, Damage]:
    """A way to damage a store file of ``size`` bytes: a description and the function that does it.

    Truncation keeps at least 2 bytes: SQLite reads a 0- or 1-byte file as an empty database, which a reader then
    initialises (see ``test_a_reader_leaves_an_empty_file_alone``).
    """
    kind = draw(st.sampled_from(["truncate", "truncate", "random", "flip", "garbage_wal", "zero_header"]))
    if kind == "truncate":
        at = draw(st.integers(2, size - 1))
        return f"truncated at {at}", lambda p: _truncate(p, at)
    if kind == "random":
        data = draw(st.binary(min_size=2, max_size=8192))
        return f"random {len(data)} bytes", lambda p: p.write_bytes(data)
    if kind == "flip":
        at = draw(st.integers(0, size - 1))
        mask = draw(st.integers(1, 255))
        return f"byte {at} xor {mask}", lambda p: _flip(p, at, mask)
    if kind == "zero_header":
        return "zeroed header", lambda p: _flip_range(p, 0, 100)
    data = draw(st.binary(min_size=1, max_size=8192))
    return f"garbage WAL of {len(data)} bytes", lambda p: Path(f"{p}-wal").write_bytes(data)


def _truncate(path: Path, at: int) -> None:
    with open(path, "r+b") as handle:
        handle.truncate(at)


def _flip(path: Path, at: int, mask: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= mask
    path.write_bytes(bytes(data))


def _flip_range(path: Path, start: int, end: int) -> None:
    data = bytearray(path.read_bytes())
    data[start:end] = bytes(end - start)
    path.write_bytes(bytes(data))
