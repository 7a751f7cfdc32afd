"""The price table: dated prices per (provider, model or model pattern), and the cached lookup of a call's price."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from fnmatch import fnmatchcase

__all__ = ["Price", "PriceEntry", "PriceTable", "day_start_ns"]

_MILLION = 1_000_000


def day_start_ns(day: date) -> int:
    """Nanoseconds since the epoch at the start (00:00 UTC) of ``day``: the instant an entry takes effect."""
    return int(datetime(day.year, day.month, day.day, tzinfo=timezone.utc).timestamp()) * 1_000_000_000


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens of each kind."""

    input: float
    output: float
    cache_read: float
    cache_write: float

    def cost(self, uncached_input: int, output: int, cache_read: int, cache_write: int) -> float:
        """The cost in US dollars of those token counts (the documented formula, in this order)."""
        return (
            uncached_input * self.input
            + cache_read * self.cache_read
            + cache_write * self.cache_write
            + output * self.output
        ) / _MILLION


@dataclass(frozen=True)
class PriceEntry:
    """One entry of a table: the price of a model (or of every model a pattern matches) from a date on."""

    providers: tuple[str, ...]
    model: str | None
    model_pattern: str | None
    price: Price
    effective: date
    source: str | None = None
    line: int | None = None
    """Where the entry starts in its file (for messages), when it came from one."""
    effective_ns: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "effective_ns", day_start_ns(self.effective))

    @property
    def match_key(self) -> tuple[str, str]:
        """What an entry of another table replaces this one by: ``("model", name)`` or ``("pattern", glob)``."""
        return ("model", self.model) if self.model is not None else ("pattern", self.model_pattern or "")


_Group = tuple[PriceEntry, ...]
"""The entries of one (provider, model or pattern), latest ``effective`` first."""


class PriceTable:
    """Entries with dates and sources. :meth:`price` answers ``(provider, model, start time) -> Price`` from a
    per-(provider, model) cache: after the first call for a pair, a dict lookup and a scan of its dated entries.

    Matching, per provider: an exact ``model`` entry first, else the longest ``model_pattern`` that matches (a
    glob: ``*``, ``?``, ``[0-9]``). Among the entries of that model (or pattern), the latest one effective on
    the call's start date (UTC) wins, so an old span keeps its old price. With no provider, the model is priced
    when exactly one entry group of the whole table matches it best (an entry listing several providers is one
    group); otherwise (unknown, or ambiguous across providers) it has no price.
    """

    def __init__(
        self,
        entries: tuple[PriceEntry, ...] = (),
        *,
        as_of: date | None = None,
        sources: tuple[str, ...] = (),
        path: str | None = None,
    ) -> None:
        self.entries = entries
        self.as_of = as_of
        self.sources = sources
        self.path = path
        self._exact: dict[str, dict[str, _Group]] = {}
        self._patterns: dict[str, list[tuple[str, _Group]]] = {}
        grouped: dict[tuple[tuple[str, ...], tuple[str, str]], list[PriceEntry]] = {}
        for entry in entries:
            grouped.setdefault((entry.providers, entry.match_key), []).append(entry)
        for (providers, (how, name)), members in grouped.items():
            group = tuple(sorted(members, key=lambda e: e.effective, reverse=True))
            for provider in providers:
                if how == "model":
                    self._exact.setdefault(provider, {})[name] = group
                else:
                    self._patterns.setdefault(provider, []).append((name, group))
        for patterns in self._patterns.values():
            patterns.sort(key=lambda item: len(item[0]), reverse=True)
        self._cache: dict[tuple[str | None, str], _Group | None] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.entries)

    def overridden_by(self, other: PriceTable) -> PriceTable:
        """This table with ``other``'s entries on top: an entry of ``other`` for the same provider and model (or
        pattern) replaces all of this table's entries for them; its other entries add."""
        replaced = {(p, e.match_key) for e in other.entries for p in e.providers}
        kept: list[PriceEntry] = []
        for entry in self.entries:
            providers = tuple(p for p in entry.providers if (p, entry.match_key) not in replaced)
            if providers == entry.providers:
                kept.append(entry)
            elif providers:
                kept.append(
                    PriceEntry(
                        providers,
                        entry.model,
                        entry.model_pattern,
                        entry.price,
                        entry.effective,
                        entry.source,
                        entry.line,
                    )
                )
        return PriceTable(
            (*kept, *other.entries),
            as_of=other.as_of or self.as_of,
            sources=(*self.sources, *(s for s in other.sources if s not in self.sources)),
            path=other.path,
        )

    def price(self, provider: str | None, model: str, start_ns: int) -> Price | None:
        """The price of ``model`` (from ``provider``) for a call started at ``start_ns`` (ns since the epoch)."""
        key = (provider, model)
        try:
            group = self._cache[key]
        except KeyError:
            group = self._group(provider, model)
            with self._lock:
                if len(self._cache) >= 4096:  # models are a small set; bound it against a hostile stream anyway
                    self._cache.clear()
                self._cache[key] = group
        if group is None:
            return None
        for entry in group:
            if entry.effective_ns <= start_ns:
                return entry.price
        return None

    def _group(self, provider: str | None, model: str) -> _Group | None:
        """The entries for ``model`` from ``provider``. The provider as the table spells it (lower case); one the
        table does not know (a framework naming itself, ``strands-agents``) or none: the model alone decides, when
        exactly one provider of the table prices it. A model a router prefixed with its provider
        (``openai/gpt-4.1-mini``, as LiteLLM and DSPy name them) is looked up without the prefix, from the
        prefix's provider when the table knows it."""
        group = self._lookup(provider, model)
        if group is None and "/" in model:
            prefix, _, bare = model.partition("/")
            if bare:
                known = self.provider_of(prefix)
                group = self._lookup(known if known is not None else provider, bare)
        return group

    def provider_of(self, name: str | None) -> str | None:
        """``name`` as a provider of this table (compared in lower case), or None when the table prices nothing
        of a provider by that name."""
        if name is None:
            return None
        if name in self._exact or name in self._patterns:
            return name
        lowered = name.lower()
        return lowered if lowered in self._exact or lowered in self._patterns else None

    def provider_for_model(self, model: str) -> str | None:
        """The one provider of this table that prices ``model`` (or, for ``prefix/model``, the prefix's provider
        when the table knows it); None when none or several do."""
        prefix, slash, bare = model.partition("/")
        if slash and bare:
            known = self.provider_of(prefix)
            if known is not None:
                return known
            model = bare
        found = [p for p in {*self._exact, *self._patterns} if self._best(p, model) is not None]
        return found[0] if len(found) == 1 else None

    def _lookup(self, provider: str | None, model: str) -> _Group | None:
        known = self.provider_of(provider)
        if known is not None:
            return self._best(known, model)
        found = {id(g): g for g in (self._best(p, model) for p in {*self._exact, *self._patterns}) if g is not None}
        return next(iter(found.values())) if len(found) == 1 else None

    def _best(self, provider: str, model: str) -> _Group | None:
        group = self._exact.get(provider, {}).get(model)
        if group is not None:
            return group
        for pattern, candidate in self._patterns.get(provider, ()):
            if fnmatchcase(model, pattern):
                return candidate
        return None
