"""The price table file is trusted like the hash key file (issue 33, item 4): a FIFO, a device, a folder, a file
someone else owns or may write, or a huge file is refused before a byte is read, with one clear line; named by
``AGENTDIAG_PRICES`` it never raises into the program (the bundled table is used); no value of the file is repeated
in a message unless it passes the public-safety check."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

import pytest

from otel_agentdiag.cost import PriceTableError, bundled_table, load_price_table, resolve_table
from otel_agentdiag.cost.loader import MAX_TABLE_BYTES

GOOD = """\
[[price]]
provider = "openai"
model = "trusted-model"
input_per_million = 1.0
output_per_million = 2.0
"""

SECRET = "sk-proj-" + "Zq7Rt2Vx9Lm4Np8K" * 3
"""A credential pasted where a key or value belongs."""

posix = pytest.mark.skipif(not hasattr(os, "geteuid"), reason="owner and mode checks are POSIX")


def _write(path: Path, text: str = GOOD, mode: int = 0o600) -> Path:
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)
    return path


def _refused(path: Path | str, reason: str) -> None:
    with pytest.raises(PriceTableError) as caught:
        load_price_table(path)
    assert str(caught.value) == f"{path}: refusing the price table: {reason}"


def test_a_good_private_file_loads(tmp_path: Path) -> None:
    table = load_price_table(_write(tmp_path / "p.toml"))
    assert [e.model for e in table.entries] == ["trusted-model"]


@posix
def test_a_device_is_refused_unread() -> None:
    _refused("/dev/zero", "is not a regular file")  # before: MemoryError from reading it whole


@posix
def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "prices.fifo"
    os.mkfifo(fifo)
    outcome: list[BaseException | None] = []

    def load() -> None:
        try:
            load_price_table(fifo)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            outcome.append(exc)
        else:
            outcome.append(None)

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    worker.join(timeout=30)  # a guard against a hang (the regression), not a synchronisation
    if worker.is_alive():  # unblock it: a writer opens the FIFO
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("reading a FIFO as the price table blocked")
    (exc,) = outcome
    assert isinstance(exc, PriceTableError)
    assert str(exc) == f"{fifo}: refusing the price table: is not a regular file"


@posix
def test_a_folder_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "prices.d"
    folder.mkdir()
    _refused(folder, "is not a regular file")


@posix
@pytest.mark.parametrize("mode", [0o620, 0o602, 0o666])
def test_a_file_others_may_write_is_refused(tmp_path: Path, mode: int) -> None:
    path = _write(tmp_path / "p.toml", mode=mode)
    _refused(path, f"writable by group or others (mode {mode:04o})")


@posix
def test_a_file_another_user_owns_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root can give a file to another user")
    path = _write(tmp_path / "p.toml", mode=0o644)
    os.chown(path, 65534, 65534)
    _refused(path, f"owned by uid 65534, not {os.geteuid()} (you)")


@posix
def test_a_symlink_is_judged_by_the_file_it_names(tmp_path: Path) -> None:
    good = _write(tmp_path / "good.toml")
    link = tmp_path / "link.toml"
    link.symlink_to(good)
    assert [e.model for e in load_price_table(link).entries] == ["trusted-model"]

    loose = _write(tmp_path / "loose.toml", mode=0o666)
    loose_link = tmp_path / "loose-link.toml"
    loose_link.symlink_to(loose)
    _refused(loose_link, "writable by group or others (mode 0666)")

    device_link = tmp_path / "zero.toml"
    device_link.symlink_to("/dev/zero")
    _refused(device_link, "is not a regular file")


def test_a_file_over_the_cap_is_refused_unread(tmp_path: Path) -> None:
    path = _write(tmp_path / "big.toml", GOOD + "#" * MAX_TABLE_BYTES + "\n")
    _refused(path, f"larger than {MAX_TABLE_BYTES} bytes")


def test_the_variable_never_raises_into_the_program(caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    targets = [tmp_path / "missing.toml"]
    if hasattr(os, "geteuid"):
        targets += ["/dev/zero", _write(tmp_path / "loose.toml", mode=0o666)]
    for target in targets:
        caplog.clear()
        with caplog.at_level(logging.ERROR, logger="otel_agentdiag.cost.pricing"):
            table = resolve_table(None, str(target))
        assert table is bundled_table()
        (record,) = caplog.records
        assert record.getMessage().startswith(f"otel-agentdiag: AGENTDIAG_PRICES: {target}: ")
        assert record.getMessage().endswith("; using the bundled price table")


def test_the_argument_raises_the_one_documented_error(tmp_path: Path) -> None:
    with pytest.raises(PriceTableError):
        resolve_table(_write(tmp_path / "loose.toml", mode=0o666) if hasattr(os, "geteuid") else "/nope", None)


@pytest.mark.parametrize(
    "text",
    [
        GOOD + f"{SECRET} = 1\n",  # an unknown key in an entry
        f'{SECRET} = "x"\n' + GOOD,  # an unknown key at the top
        GOOD.replace("input_per_million = 1.0", f'input_per_million = 1.0\ncurrency = "{SECRET}"'),
        GOOD + f'effective = "{SECRET}"\n',
    ],
)
def test_a_value_shaped_like_a_credential_is_never_repeated(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, text: str
) -> None:
    path = _write(tmp_path / "p.toml", text)
    with pytest.raises(PriceTableError) as caught:
        load_price_table(path)
    assert SECRET not in str(caught.value)
    assert "(a value not shown: it may be a secret)" in str(caught.value)
    with caplog.at_level(logging.ERROR, logger="otel_agentdiag.cost.pricing"):
        resolve_table(None, str(path))
    assert caplog.records
    assert all(SECRET not in r.getMessage() for r in caplog.records)


def test_a_plain_typo_is_still_named(tmp_path: Path) -> None:
    path = _write(tmp_path / "p.toml", GOOD + "modle = 1\n")
    with pytest.raises(PriceTableError, match="unknown key 'modle'"):
        load_price_table(path)
    path = _write(tmp_path / "q.toml", GOOD.replace('"openai"', '"openai"\ncurrency = "EUR"'))
    with pytest.raises(PriceTableError, match="currency 'EUR' is not supported"):
        load_price_table(path)
