"""Read a price table from TOML, with errors that name the file and the line of what is wrong."""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Mapping
from datetime import date, datetime
from typing import Any

from otel_agentdiag.cost.table import Price, PriceEntry, PriceTable

__all__ = ["PriceTableError", "load_price_table", "parse_price_table"]

CURRENCY = "USD"
"""The one currency accepted: the attributes are ``*.usd``."""

_TOP_KEYS = frozenset({"as_of", "sources", "currency", "price"})
_PRICE_KEYS = {
    "input_per_million": "input",
    "output_per_million": "output",
    "cache_read_per_million": "cache_read",
    "cache_write_per_million": "cache_write",
}
_ENTRY_KEYS = frozenset({"provider", "model", "model_pattern", "currency", "effective", "source", *_PRICE_KEYS})
_HEADER = re.compile(r"^\s*\[\[\s*price\s*\]\]")
_ANY_HEADER = re.compile(r"^\s*\[")
_MAX_PRICE = 1e6
"""US dollars per million tokens: anything above is a typo (a price per token written per million, ...)."""


class PriceTableError(ValueError):
    """A price table that cannot be used; the message starts with ``file:line:`` when the line is known."""


MAX_TABLE_BYTES = 1 << 20
"""The largest price table read (1 MiB; the bundled one is about 16 KiB): a bigger file is refused unread."""

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def load_price_table(path: str | os.PathLike[str]) -> PriceTable:
    """Read the TOML price table at ``path``. Raises :class:`PriceTableError` naming the file (and line).

    Prices drive budgets, so the file is trusted like the hash key file (:mod:`otel_agentdiag._internal.trust`):
    it must be a regular file (a FIFO, ``/dev/zero`` or a folder is refused without blocking or reading), owned
    by the effective user, not writable by group or others, and at most :data:`MAX_TABLE_BYTES`. A final symbolic
    link is not followed blindly: its target is opened without following links and checked the same way.
    """
    source = os.fspath(path)
    raw = _read_trusted(source)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PriceTableError(f"{source}: not UTF-8 text (byte {exc.start})") from None
    return parse_price_table(text, source)


def _read_trusted(source: str) -> bytes:
    """The bytes of the price table file ``source``, checked before a byte is read (see :func:`load_price_table`)."""
    from otel_agentdiag._internal import trust

    flags = os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC
    try:
        try:
            fd = os.open(source, flags)
        except OSError:
            if not (_NOFOLLOW and os.path.islink(source)):
                raise
            # A final symbolic link (ELOOP under O_NOFOLLOW): the file it names is checked as if named directly.
            fd = os.open(os.path.realpath(source), flags)
    except OSError as exc:
        raise PriceTableError(f"{source}: cannot read the price table: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        try:
            trust.check_stat(st, source, "price table")
        except trust.UntrustedPathError as exc:
            raise PriceTableError(f"{source}: refusing the price table: {exc.reason}") from None
        if not trust.CHECKS_APPLY and not _is_regular(st):
            raise PriceTableError(f"{source}: refusing the price table: is not a regular file")
        if st.st_size > MAX_TABLE_BYTES:
            raise PriceTableError(f"{source}: refusing the price table: larger than {MAX_TABLE_BYTES} bytes")
        if _NONBLOCK:
            os.set_blocking(fd, True)
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_TABLE_BYTES:
            chunk = os.read(fd, MAX_TABLE_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > MAX_TABLE_BYTES:  # grew after the fstat
            raise PriceTableError(f"{source}: refusing the price table: larger than {MAX_TABLE_BYTES} bytes")
        return b"".join(chunks)
    except OSError as exc:
        raise PriceTableError(f"{source}: cannot read the price table: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _is_regular(st: os.stat_result) -> bool:
    import stat

    return stat.S_ISREG(st.st_mode)


def _shown(value: Any) -> str:
    """``repr(value)`` for an error message when it is safe to repeat in a log line (a short number, date or
    name that passes the public-safety check), else a placeholder: a table's typo may be a pasted credential."""
    if isinstance(value, bool) or isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (date, datetime)):
        return value.isoformat()
    if isinstance(value, str) and len(value) <= 64 and value.isprintable():
        from otel_agentdiag.redaction.recognizers import is_sensitive

        if not is_sensitive(value):
            return repr(value)
    return "(a value not shown: it may be a secret)"


def parse_price_table(text: str, source: str = "prices") -> PriceTable:
    """A price table from TOML ``text``; ``source`` names it in error messages (and becomes its ``path``)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on Python 3.10 only
        import tomli as tomllib  # type: ignore[import-not-found,no-redef,unused-ignore]
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = getattr(exc, "lineno", None) or _line_of_message(str(exc))
        where = f"{source}:{line}" if line else source
        raise PriceTableError(f"{where}: not valid TOML: {_reason(str(exc))}") from None
    except RecursionError:
        raise PriceTableError(f"{source}: arrays or tables nest too deeply") from None
    return _Reader(text, source).table(data)


def _line_of_message(message: str) -> int | None:
    found = re.search(r"line (\d+)", message)
    return int(found.group(1)) if found else None


def _reason(message: str) -> str:
    return re.sub(r"\s*\(at line \d+, column \d+\)$", "", message)


class _Reader:
    """Semantic checks over parsed TOML, finding each offending key's line in the text."""

    def __init__(self, text: str, source: str) -> None:
        self.source = source
        self.lines = text.splitlines()
        headers = [i for i, line in enumerate(self.lines) if _ANY_HEADER.match(line)]
        self.top_end = headers[0] if headers else len(self.lines)
        self.entry_starts = [i for i, line in enumerate(self.lines) if _HEADER.match(line)]
        self.headers = headers

    # -- where ------------------------------------------------------------------------------------------
    def _entry_span(self, index: int | None) -> tuple[int, int]:
        if index is None:
            return 0, self.top_end
        if index >= len(self.entry_starts):  # an inline array of tables: search the whole file
            return 0, len(self.lines)
        start = self.entry_starts[index]
        end = next((h for h in self.headers if h > start), len(self.lines))
        return start, end

    def line_of(self, index: int | None, key: str | None = None) -> int | None:
        """1-based line of ``key`` in entry ``index`` (None: the top level), else of the entry's header."""
        start, end = self._entry_span(index)
        if key is not None:
            pattern = re.compile(rf"^\s*(\"{re.escape(key)}\"|'{re.escape(key)}'|{re.escape(key)})\s*=")
            for i in range(start, end):
                if pattern.match(self.lines[i]):
                    return i + 1
        if index is not None and index < len(self.entry_starts):
            return self.entry_starts[index] + 1
        return None

    def error(self, index: int | None, key: str | None, what: str) -> PriceTableError:
        line = self.line_of(index, key)
        where = f"{self.source}:{line}" if line else self.source
        entry = "" if index is None else f"price entry {index + 1}: "
        return PriceTableError(f"{where}: {entry}{what}")

    # -- reading ----------------------------------------------------------------------------------------
    def table(self, data: Mapping[str, Any]) -> PriceTable:
        for key in data:
            if key not in _TOP_KEYS:
                raise self.error(
                    None, key, f"unknown key {_shown(key)} (expected one of {', '.join(sorted(_TOP_KEYS))})"
                )
        currency = self._currency(None, data.get("currency", CURRENCY))
        as_of = self._date(None, "as_of", data["as_of"]) if "as_of" in data else None
        sources = data.get("sources", [])
        if not isinstance(sources, list) or not all(isinstance(s, str) and s for s in sources):
            raise self.error(None, "sources", "sources must be an array of URLs (strings)")
        entries = data.get("price", [])
        if not isinstance(entries, list):
            raise self.error(None, "price", "price must be an array of tables ([[price]] entries)")
        out = tuple(self._entry(i, raw, currency) for i, raw in enumerate(entries))
        return PriceTable(out, as_of=as_of, sources=tuple(sources), path=self.source)

    def _entry(self, index: int, raw: Any, currency: str) -> PriceEntry:
        if not isinstance(raw, dict):
            raise self.error(index, None, "must be a table")
        for key in raw:
            if key not in _ENTRY_KEYS:
                raise self.error(
                    index, key, f"unknown key {_shown(key)} (expected one of {', '.join(sorted(_ENTRY_KEYS))})"
                )
        providers = self._providers(index, raw.get("provider"))
        model, pattern = raw.get("model"), raw.get("model_pattern")
        if model is not None and pattern is not None:
            raise self.error(index, "model_pattern", "give model or model_pattern, not both")
        if model is None and pattern is None:
            raise self.error(index, None, "missing model (or model_pattern)")
        key = "model" if model is not None else "model_pattern"
        name = model if model is not None else pattern
        if not isinstance(name, str) or not name.strip() or name != name.strip():
            raise self.error(index, key, f"{key} must be a non-empty string without surrounding spaces")
        self._currency(index, raw.get("currency", currency))
        prices: dict[str, float] = {}
        for toml_key, field_name in _PRICE_KEYS.items():
            if toml_key in raw:
                prices[field_name] = self._amount(index, toml_key, raw[toml_key])
        for required in ("input_per_million", "output_per_million"):
            if required not in raw:
                raise self.error(index, None, f"missing {required}")
        price = Price(
            input=prices["input"],
            output=prices["output"],
            cache_read=prices.get("cache_read", prices["input"]),
            cache_write=prices.get("cache_write", prices["input"]),
        )
        effective = self._date(index, "effective", raw["effective"]) if "effective" in raw else date.min
        source = raw.get("source")
        if source is not None and (not isinstance(source, str) or not source):
            raise self.error(index, "source", "source must be a URL (a string)")
        line = self.line_of(index)
        return PriceEntry(
            providers,
            model if model is not None else None,
            pattern if model is None else None,
            price,
            effective,
            source,
            line,
        )

    def _providers(self, index: int, value: Any) -> tuple[str, ...]:
        if value is None:
            raise self.error(index, None, "missing provider (a gen_ai.provider.name value, or an array of them)")
        names = [value] if isinstance(value, str) else value
        if not isinstance(names, list) or not names or not all(isinstance(n, str) and n.strip() for n in names):
            raise self.error(index, "provider", "provider must be a non-empty string or array of strings")
        return tuple(dict.fromkeys(names))

    def _currency(self, index: int | None, value: Any) -> str:
        if value != CURRENCY:
            raise self.error(
                index,
                "currency",
                f"currency {_shown(value)} is not supported: prices must be in USD (the attribute is .usd)",
            )
        return CURRENCY

    def _amount(self, index: int, key: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(index, key, f"{key} must be a number (US dollars per million tokens)")
        amount = float(value)
        if not math.isfinite(amount) or amount < 0:
            raise self.error(index, key, f"{key} must be a finite number, zero or more (got {_shown(value)})")
        if amount > _MAX_PRICE:
            raise self.error(index, key, f"{key} is over {_MAX_PRICE:g} US dollars per million tokens")
        return amount

    def _date(self, index: int | None, key: str, value: Any) -> date:
        if isinstance(value, datetime):
            raise self.error(index, key, f"{key} must be a date (YYYY-MM-DD), not a date and time")
        if isinstance(value, date):
            return value
        if isinstance(value, str):
            try:
                return date.fromisoformat(value)
            except ValueError:
                pass
        raise self.error(index, key, f"{key} must be a date (YYYY-MM-DD), got {_shown(value)}")
