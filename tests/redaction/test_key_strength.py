"""Weak hash keys are refused wherever a key comes from: an argument (text or bytes), AGENTDIAG_HASH_KEY and
AGENTDIAG_OTLP_HASH_KEY, the key file, and IdHasher itself. Keys from generators are accepted.

Every weak key here is one a person would choose (words, sentences, patterns, walks, repeats); the refusal names
where the key came from and how to make a good one, and never the key.
"""

from __future__ import annotations

import base64
import logging
import os
import re
import secrets
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import otel_agentdiag as agentdiag
from otel_agentdiag._internal.trust import UntrustedPathError
from otel_agentdiag.diagnostics.projection import load_store_hasher
from otel_agentdiag.redaction import hashing
from otel_agentdiag.redaction.hashing import IdHasher, WeakKeyError, key_from_text, key_id_for
from otel_agentdiag.redaction.key_strength import check_key_bytes, check_key_file_bytes

GENERATE = 'python -c "import secrets; print(secrets.token_hex(32))"'
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
needs_root = pytest.mark.skipif(not IS_ROOT, reason="simulating another user's file needs chown, which needs root")

WEAK_TEXT = [
    # too short, in any form
    "",
    "hunter2",
    "s3cr3t-k3y",
    "0123456789abcdef0123456789abcdef",  # 16 bytes of hex
    "otel-agentdiag-test-key-32-bytes",  # 32 characters, but 24 bytes as base64
    "x" * 42,
    # not a key form at all
    "correct horse battery staple and then some more words to be long enough",
    "Password123!Password123!Password123!Password123!",
    "pässwörtchen-pässwörtchen-pässwörtchen-pässwörtchen",
    "my\tsecret\tkey\tthat\tis\tlong\tenough\tto\tpass\tthe\tlength",
    # the right form, visibly chosen
    "a" * 64,
    "0" * 64,
    "f" * 128,
    "deadbeef" * 8,
    "0123456789abcdef" * 4,
    "fedcba9876543210" * 4,
    "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
    "0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20",
    "c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00",
    "password123" * 5,
    "letmeinletmeinletmeinletmeinletmeinletmeinletmein",
    "qwertyuiopasdfghjklzxcvbnmQWERTYUIOPASDFGHJKLZXCVBNM",
    "1qaz2wsx3edc4rfv5tgb6yhn7ujm8ik9ol0p1qaz2wsx3edc",
    "zxcvbnmasdfghjklqwertyuiop1234567890zxcvbnmasdf",
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
    "CorrectHorseBatteryStapleCorrectHorseBatteryStaple",
    "WeShipOnFridaysAndTheKeyIsForTheBillingAgentOnly",
    "SupportBundleKeyForAcmeCorpProductionEnvironment",
    "hash_key_for_the_customer_support_agent_in_prod_v2",
    "my-company-production-agent-hash-key-2024-v1",
    "Spring2024Summer2024Autumn2024Winter2024Spring2025",
    "ilovemycatfluffysomuchshesthebestcatintheworld",
    "doctor-must-never-print-this-key-0123456789",
    "TWFueSBoYW5kcyBtYWtlIGxpZ2h0IHdvcmssIHNvIGxldCB1cyBzaGFyZSB0aGUga2V5",  # base64 of an English sentence
]
WEAK_BYTES = [
    b"",
    b"short",
    b"\x00" * 32,
    b"\xff" * 64,
    bytes(range(32)),
    bytes(range(255, 191, -1)),
    b"\xde\xad\xbe\xef" * 8,
    b"otel-agentdiag-test-key-32-bytes",
    b"k" * 32,
    b"my secret key that nobody will ever guess, surely",
    "ein geheimer Schlüssel für die Agenten, bitte nicht weitersagen".encode(),
]


def strong_text_keys() -> list[str]:
    raw = secrets.token_bytes(32)
    return [
        secrets.token_hex(32),
        secrets.token_hex(32).upper(),
        secrets.token_hex(64),
        secrets.token_urlsafe(32),
        secrets.token_urlsafe(48),
        base64.b64encode(raw).decode(),
        base64.b64encode(raw).decode().rstrip("="),
        base64.urlsafe_b64encode(secrets.token_bytes(40)).decode(),
    ]


@pytest.mark.parametrize("text", WEAK_TEXT)
def test_a_weak_text_key_is_refused_with_how_to_make_one(text: str) -> None:
    with pytest.raises(WeakKeyError) as raised:
        key_from_text(text, "AGENTDIAG_HASH_KEY")
    message = str(raised.value)
    assert message.startswith("refusing the hash key from AGENTDIAG_HASH_KEY: ")
    assert GENERATE in message
    assert "\n" not in message
    if len(text) >= 4:
        assert text not in message and text[:8] not in message.split(": ", 1)[1]


@pytest.mark.parametrize("key", WEAK_BYTES)
def test_a_weak_bytes_key_is_refused(key: bytes) -> None:
    with pytest.raises(WeakKeyError, match="refusing the hash key from argument hash_key: "):
        check_key_bytes(key, "argument hash_key")
    with pytest.raises(ValueError):  # WeakKeyError (an empty key: the older "must be non-empty" ValueError)
        IdHasher(key)  # the one place every keyed digest is made
    IdHasher(key or b"x", algorithm="sha256")  # unkeyed: the key is not used, so not judged


def test_keys_from_generators_are_accepted_and_keep_their_key_id() -> None:
    for _ in range(40):
        for text in strong_text_keys():
            assert key_from_text(text, "test") == text.encode()  # the text's bytes stay the key
            assert IdHasher(text.encode()).key_id == key_id_for(text.encode())
        raw = secrets.token_bytes(32)
        assert check_key_bytes(raw, "test") == raw
        assert IdHasher(raw).key_id == key_id_for(raw)
        assert IdHasher(hashing.ephemeral_key()).key_id


def test_a_thousand_random_keys_of_each_form_are_never_refused() -> None:
    """The refusal bound is 2**-40 per random key: no generated key should ever meet it."""
    for _ in range(1000):
        key_from_text(secrets.token_hex(32), "test")
        key_from_text(secrets.token_urlsafe(32), "test")
        check_key_bytes(secrets.token_bytes(32), "test")


@pytest.mark.parametrize("ending", ["\n", "\r\n"])
def test_a_key_file_written_by_hand_may_end_in_a_line_break(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, ending: str
) -> None:
    """``openssl rand -hex 32 > hash.key``: judged without the line break, which stays part of the key (its id)."""
    data = (secrets.token_hex(32) + ending).encode()
    assert check_key_file_bytes(data, "key file k") == data
    with pytest.raises(WeakKeyError):
        check_key_file_bytes(b"deadbeef" * 8 + ending.encode(), "key file k")
    key = tmp_path / hashing.KEY_FILE_NAME
    key.write_bytes(data)
    key.chmod(0o600)
    hasher = load_store_hasher(tmp_path / "traces.db")
    assert hasher is not None and hasher.key_id == key_id_for(data)
    with agentdiag.configure(store=tmp_path / "traces.db", set_global=False) as diag:
        assert [(d.name, d.hasher.key_id) for d in diag.destinations] == [("local", key_id_for(data))]
    assert _error_lines(caplog) == []


# -- through configure() -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("key", ["hunter2", "CorrectHorseBatteryStapleCorrectHorseBatteryStaple", b"k" * 32])
@pytest.mark.parametrize("argument", ["hash_key", "otlp_hash_key"])
def test_a_weak_key_argument_raises_before_anything_is_installed(
    tmp_path: Path, key: str | bytes, argument: str
) -> None:
    with pytest.raises(WeakKeyError, match=f"refusing the hash key from argument {argument}: ") as raised:
        agentdiag.configure(store=tmp_path / "t.db", set_global=False, **{argument: key})  # type: ignore[arg-type]
    assert GENERATE in str(raised.value)
    assert not (tmp_path / "t.db").exists()


def _error_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.parametrize("weak", ["tr0ub4dor&3", "iloveyouiloveyouiloveyouiloveyouiloveyouiloveyou", "f" * 64])
def test_a_weak_key_variable_turns_off_what_would_use_it_and_says_so_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, weak: str
) -> None:
    monkeypatch.setenv("AGENTDIAG_HASH_KEY", weak)
    store = tmp_path / "s" / "traces.db"
    with agentdiag.configure(store=store, set_global=False) as diag:
        with agentdiag.agent_run("a", conversation_id="c-1"):
            pass  # the agent runs as ever
        assert diag.destinations == () and diag.store_path is None
    (line,) = _error_lines(caplog)
    assert line.startswith("otel-agentdiag: refusing the hash key from AGENTDIAG_HASH_KEY: ")
    assert line.endswith("; the local store is off") and GENERATE in line
    assert weak not in line
    assert not store.exists() and not (store.parent / hashing.KEY_FILE_NAME).exists()  # never replaced by a file


def test_a_weak_otlp_key_variable_turns_off_only_the_otlp_export(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("AGENTDIAG_OTLP_HASH_KEY", "our-otlp-key-for-the-fleet-please-do-not-share")
    store = tmp_path / "traces.db"
    with agentdiag.configure(
        store=store, otlp_endpoint="http://127.0.0.1:9", hash_key=secrets.token_hex(32), set_global=False
    ) as diag:
        assert [d.name for d in diag.destinations] == ["local"]
    (line,) = _error_lines(caplog)
    assert line.startswith("otel-agentdiag: refusing the hash key from AGENTDIAG_OTLP_HASH_KEY: ")
    assert line.endswith("; the OTLP export is off")


def test_a_weak_local_key_variable_leaves_an_otlp_export_with_its_own_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("AGENTDIAG_HASH_KEY", "passwordpasswordpasswordpasswordpasswordpassword")
    monkeypatch.setenv("AGENTDIAG_OTLP_HASH_KEY", secrets.token_hex(32))
    with agentdiag.configure(store=tmp_path / "t.db", otlp_endpoint="http://127.0.0.1:9", set_global=False) as diag:
        assert [(d.name, d.key_source) for d in diag.destinations] == [("otlp", "AGENTDIAG_OTLP_HASH_KEY")]
    (line,) = _error_lines(caplog)
    assert line.endswith("; the local store is off")


def test_without_its_own_key_the_otlp_export_is_off_with_a_weak_local_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("AGENTDIAG_HASH_KEY", "a1b2c3d4" * 8)
    with agentdiag.configure(store=tmp_path / "t.db", otlp_endpoint="http://127.0.0.1:9", set_global=False) as diag:
        assert diag.destinations == ()
    (line,) = _error_lines(caplog)
    assert line.endswith("; the local store and the OTLP export are off")


# -- the key file ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "content",
    [b"", b"short", b"0123456789abcdef", b"\x00" * 32, b"deadbeef" * 8 + b"\n", b"correct horse battery staple\n"],
)
def test_a_weak_key_file_is_refused_never_replaced(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: bytes
) -> None:
    key = tmp_path / hashing.KEY_FILE_NAME
    key.write_bytes(content)
    key.chmod(0o600)
    with pytest.raises(WeakKeyError, match=f"refusing the hash key from key file {key}: "):
        hashing.load_or_create_key_file(key)
    with pytest.raises(WeakKeyError):
        load_store_hasher(tmp_path / "traces.db")
    with agentdiag.configure(store=tmp_path / "traces.db", set_global=False) as diag:
        assert diag.destinations == ()
    (line,) = _error_lines(caplog)
    assert line.startswith(f"otel-agentdiag: refusing the hash key from key file {key}: ")
    assert key.read_bytes() == content  # left as it was: the user decides what to do with it


def test_the_generated_key_file_is_32_random_private_bytes(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / hashing.KEY_FILE_NAME
    key = hashing.load_or_create_key_file(path)
    assert len(key) == 32 and path.read_bytes() == key
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert hashing.load_or_create_key_file(path) == key == hashing.read_key_file(path)
    assert sorted(p.name for p in path.parent.iterdir()) == [hashing.KEY_FILE_NAME]  # no temporary file left


_CREATE = """
import sys
from pathlib import Path
from otel_agentdiag.redaction import hashing
sys.stdin.readline()
print(hashing.load_or_create_key_file(Path(sys.argv[1])).hex())
"""


def test_processes_starting_together_all_get_the_same_complete_key(tmp_path: Path) -> None:
    """The key file appears complete or not at all, so no process reads a half-written key (and refuses it)."""
    path = tmp_path / "store" / hashing.KEY_FILE_NAME
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CREATE, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    outputs = [proc.communicate(timeout=120) for proc in procs]
    assert [p.returncode for p in procs] == [0] * 6, [err for _out, err in outputs]
    assert {out.strip() for out, _err in outputs} == {path.read_bytes().hex()}


def test_a_key_file_others_can_read_is_tightened_with_advice_to_rotate(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / hashing.KEY_FILE_NAME
    key = hashing.load_or_create_key_file(path)
    path.chmod(0o644)
    assert hashing.load_or_create_key_file(path) == key
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    (warning,) = [r.getMessage() for r in caplog.records if "readable by others" in r.getMessage()]
    assert "make a new one (see key rotation in docs/policy.md)" in warning


@pytest.mark.parametrize("mode", [0o620, 0o602, 0o666])
def test_a_key_file_others_can_write_is_refused(tmp_path: Path, mode: int) -> None:
    path = tmp_path / hashing.KEY_FILE_NAME
    hashing.load_or_create_key_file(path)
    path.chmod(mode)
    reason = f"writable by group or others (mode {mode:04o})"
    with pytest.raises(UntrustedPathError, match=re.escape(f"refusing hash key file {path}: {reason}")):
        hashing.load_or_create_key_file(path)
    with pytest.raises(UntrustedPathError, match=re.escape(reason)):
        load_store_hasher(tmp_path / "traces.db")


@pytest.mark.parametrize("dangling", [False, True], ids=["live", "dangling"])
def test_a_key_file_that_is_a_symlink_is_refused_and_not_followed(tmp_path: Path, dangling: bool) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    target = elsewhere / "their.key"
    if not dangling:
        target.write_bytes(secrets.token_bytes(32))
    path = tmp_path / "store" / hashing.KEY_FILE_NAME
    path.parent.mkdir(mode=0o700)
    path.symlink_to(target)
    for read in (hashing.load_or_create_key_file, hashing.read_key_file):
        with pytest.raises(UntrustedPathError, match=f"hash key file {path}: is a symbolic link"):
            read(path)
    assert target.exists() is not dangling  # a dangling link is never created through


@needs_root
def test_a_key_file_another_user_made_is_refused(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Someone who planted the key knows it, and with it every digest made with it."""
    path = tmp_path / hashing.KEY_FILE_NAME
    path.write_bytes(secrets.token_bytes(32))
    path.chmod(0o600)
    os.chown(path, 12345, 12345)
    with pytest.raises(UntrustedPathError, match=re.escape(f"hash key file {path}: owned by uid 12345, not 0 (you)")):
        hashing.read_key_file(path)
    with agentdiag.configure(store=tmp_path / "traces.db", set_global=False) as diag:
        assert diag.destinations == ()
    (line,) = _error_lines(caplog)
    assert (
        line
        == f"otel-agentdiag: refusing hash key file {path}: owned by uid 12345, not 0 (you); the local store is off"
    )


@needs_root
def test_a_key_folder_another_user_made_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    folder.mkdir(mode=0o700)
    os.chown(folder, 12345, 12345)
    with pytest.raises(UntrustedPathError, match=f"store folder {folder}: owned by uid 12345"):
        hashing.load_or_create_key_file(folder / hashing.KEY_FILE_NAME)
    assert list(folder.iterdir()) == []


def test_a_key_folder_others_may_write_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    folder.mkdir(mode=0o700)
    folder.chmod(0o777)
    with pytest.raises(UntrustedPathError, match=r"store folder .*: writable by group or others \(mode 0777\)"):
        hashing.load_or_create_key_file(folder / hashing.KEY_FILE_NAME)
    assert list(folder.iterdir()) == []
