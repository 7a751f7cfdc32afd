"""CLI errors never echo an id, a session, a time or a URL the user gave: a raw conversation id or a token pasted
into an argument must not end up in a terminal log or an issue report. Every case: exit 2, one line on stderr
(``agentdiag: error: ...``), the sentinel nowhere in stdout or stderr; the line still says what was wrong."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from otel_agentdiag._internal.inputs import describe_input, scrub
from otel_agentdiag.cli import cli
from otel_agentdiag.cli._common import safe_url

SENTINEL = "tok_HOSTILE_7f3a9c"
HEX_SENTINEL = "deadbeefcafe7f3a9c01"
_ENV_PREFIXES = ("AGENTDIAG_", "OTEL_")


@pytest.fixture(autouse=True)
def _hermetic(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith(_ENV_PREFIXES):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hostile") / "traces.db"
    result = CliRunner().invoke(cli, ["demo", "--store", str(path)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return path


def run(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def assert_quiet_error(result: Result, *sentinels: str) -> str:
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("agentdiag: error: "), result.stderr
    for sentinel in sentinels:
        assert sentinel not in result.stdout and sentinel not in result.stderr, result.stderr
        assert sentinel.lower() not in result.stderr.lower()
    return lines[0]


# -- ids, sessions and times against a real store -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["show", SENTINEL], "not a trace id"),
        (["show", HEX_SENTINEL], "no trace in"),
        (["show", f"{SENTINEL}\x1b[31m\n"], "not a trace id"),
        (["receipt", "--session", SENTINEL], "no session in"),
        (["receipt", "--session", HEX_SENTINEL], "no session in"),
        (["receipt", "--session", f"hmac-sha256:{SENTINEL}"], "no session in"),
        (["status", "--session", SENTINEL], "no session in"),
        (["clear", "--session", SENTINEL, "--yes"], "no session in"),
        (["export", "--out", "b.json", "--session", SENTINEL], "no session in"),
        (["push", "--endpoint", "http://127.0.0.1:9", "--session", SENTINEL], "no session in"),
        (["status", "--as-of", SENTINEL], "is not an ISO-8601 time"),
        (["status", "--as-of", f"2025-01-31T12:00:00{SENTINEL}"], "is not an ISO-8601 time"),
        (["status", "--stall-threshold", SENTINEL], "--stall-threshold"),
        (["prune", "--max-session-spans", SENTINEL], "is not a positive number"),
    ],
)
def test_a_bad_id_session_or_time_is_described_never_echoed(store: Path, args: list[str], says: str) -> None:
    line = assert_quiet_error(run(*args, "--store", store), SENTINEL, HEX_SENTINEL)
    assert says in line
    assert "characters" in line or "--stall-threshold" in line  # the shape of what was given, not its text


def test_a_session_prefix_that_is_too_short_or_ambiguous_is_described(store: Path) -> None:
    line = assert_quiet_error(run("receipt", "--session", "zq1", "--store", store), "zq1")
    assert "no session in" in line and "a value of 3 characters" in line


# -- URLs: user info, path, query, fragment, port --------------------------------------------------------------------
@pytest.mark.parametrize(
    "endpoint",
    [
        f"http://user:{SENTINEL}@127.0.0.1:4318/v1/traces?token={SENTINEL}",
        f"http://127.0.0.1:4318/v1/traces?token={SENTINEL}",
        f"http://127.0.0.1:4318/#{SENTINEL}",
        f"http://127.0.0.1:{SENTINEL}/",
        f"http://[{SENTINEL}]:4318/",
        f"ftp://{SENTINEL}.example/",
        f"{SENTINEL}://collector/",
    ],
)
def test_an_unusable_endpoint_is_described_never_echoed(endpoint: str) -> None:
    line = assert_quiet_error(run("push", "--endpoint", endpoint, "--store", "none.db"), SENTINEL)
    assert "--endpoint is not usable" in line


def test_a_token_in_the_endpoints_path_never_reaches_the_output(store: Path) -> None:
    """The push goes nowhere (a closed port); the failure line names scheme, host and port, not the token."""
    endpoint = f"http://push-user:{SENTINEL}@127.0.0.1:9/tenant/{SENTINEL}0123456789abcdef/otlp"
    result = run("push", "--endpoint", endpoint, "--timeout", "1", "--store", store)
    assert result.exit_code == 1
    assert SENTINEL not in result.output and SENTINEL not in result.stderr
    assert "http://127.0.0.1:9/tenant/…/otlp/v1/traces" in result.stderr


# -- click's own errors: bad values of typed options, unknown options, extra arguments ------------------------------
@pytest.mark.parametrize(
    "args",
    [
        ["traces", "--format", SENTINEL],
        ["traces", "--limit", SENTINEL],
        ["push", "--endpoint", "http://127.0.0.1:9", "--batch-size", SENTINEL],
        ["push", "--endpoint", "http://127.0.0.1:9", "--timeout", SENTINEL],
        ["push", "--endpoint", "http://127.0.0.1:9", "--protocol", SENTINEL],
        ["show", f"--{SENTINEL}"],
        ["show", f"--format={SENTINEL}", "abcd"],
        ["show", "abcd", SENTINEL],
        [SENTINEL],
        ["ingest", "x.json", "--max-session-age", SENTINEL],
    ],
)
def test_click_errors_describe_what_was_typed(args: list[str]) -> None:
    assert_quiet_error(run(*args), SENTINEL)


def test_a_real_process_prints_one_line_without_the_sentinel(store: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_ENV_PREFIXES)}
    for args in (
        ["show", SENTINEL, "--store", str(store)],
        ["receipt", "--session", SENTINEL, "--store", str(store)],
        ["push", "--endpoint", f"http://u:{SENTINEL}@127.0.0.1:{SENTINEL}/", "--store", str(store)],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "otel_agentdiag", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 2, done.stderr
        assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith("agentdiag: error: ")
        assert SENTINEL not in done.stdout + done.stderr


# -- the helper ----------------------------------------------------------------------------------------------------
def test_describe_input_says_the_shape_only() -> None:
    assert describe_input("") == describe_input("   ") == "an empty value"
    assert describe_input("deadbeef") == "a value of 8 characters (hex digits only)"
    assert describe_input("abc123XYZ") == "a value of 9 characters (letters and digits)"
    assert describe_input("conv-42") == "a value of 7 characters (printable characters)"
    assert describe_input("a\x1bb") == "a value of 3 characters (non-printable characters too)"
    assert describe_input(0.5) == "a value of 3 characters (printable characters)"
    assert describe_input("abc") == "a value of 3 characters (letters only)"  # not hex: too short, no digit
    assert describe_input("123") == "a value of 3 characters (hex digits only)"


# -- what is safe is said as typed (issue 34): option and command names, numbers, lowercase words, the user's paths --
@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["traces", "--bogus"], "No such option '--bogus'"),
        (["serve", "--port", "99999"], "99999 is not in the range"),
        (["show", "--format", "yaml", "abcd"], "'yaml' is not one of 'text', 'json'"),
        (["traces", "--format=bogus"], "'bogus' is not one of"),
        (["bogus-cmd"], "No such command 'bogus-cmd'"),
        (["traces", "--limit", "abc"], "'abc' is not a valid integer"),
    ],
)
def test_what_is_safe_to_repeat_is_repeated(args: list[str], says: str) -> None:
    result = run(*args)
    assert result.exit_code == 2
    assert says in result.stderr, result.stderr


def test_a_path_the_user_typed_is_named(tmp_path: Path) -> None:
    folder = tmp_path / "Secret_Looking-Dir42"
    folder.mkdir()
    for args in (["traces", "--store", str(folder)], ["traces", f"--store={folder}"]):
        result = run(*args)
        assert result.exit_code == 2
        assert f"File '{folder}' is a directory" in result.stderr, result.stderr


@pytest.mark.parametrize(
    "word",
    [SENTINEL, "4111111111111111", "Bearer-abc", "jane@example.com", "2026-12-06T10:00:00Z", "http://h/x", "abc123def"],
)
def test_a_value_that_may_be_an_id_a_time_or_a_secret_is_still_described(word: str) -> None:
    for args in (["traces", "--format", word], ["show", f"--{word}"], [word]):
        result = run(*args)
        assert result.exit_code == 2
        assert word not in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            f"https://u:{SENTINEL}@Collector.Example:4318/v1/traces?t={SENTINEL}#{SENTINEL}",
            "https://collector.example:4318/v1/traces",
        ),
        (f"http://h/{SENTINEL}0123456789/v1/traces", "http://h/…/v1/traces"),
        ("http://h/otlp/tenant-a/v1/traces", "http://h/otlp/tenant-a/v1/traces"),
        (f"http://h/ghp_{SENTINEL}0123456789abcdefghij/", "http://h/…/"),
        ("http://[::1]:4318/", "http://[::1]:4318/"),
        (f"http://h:{SENTINEL}/", "<unparseable endpoint>"),
    ],
)
def test_safe_url_keeps_only_scheme_host_port_and_plain_path_words(url: str, shown: str) -> None:
    assert safe_url(url) == shown


def test_scrub_replaces_given_words_in_one_pass_and_keeps_names() -> None:
    message = f"Invalid value for '--format': '{SENTINEL}' is not one of 'text', 'json'."
    assert scrub(message, ["--format", SENTINEL], ["--format"]) == (
        "Invalid value for '--format': '<a value of 18 characters (printable characters)>' is not one of 'text', "
        "'json'."
    )
    assert scrub("no value here", ["abc"]) == "no value here"  # too short to hold a secret: left alone
