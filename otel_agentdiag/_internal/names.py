"""The registry of tool, agent and model names that are code, not data.

Names declared through ``@tool``/``@agent``, ``agent_run(name)``, ``register_names()`` or a framework's own
tool, agent and guardrail definitions land here; the redacting processor replaces any other tool, agent or
guardrail name with a fixed placeholder. A name is registered only if it is a bounded token (see
:data:`NAME_PATTERN` and :data:`DECLARED_NAME_PATTERN`) **and** passes the public-safety check every other kept
string meets (:func:`otel_agentdiag.redaction.recognizers.is_sensitive`: no credential, e-mail address, URL or path),
so the registry cannot be used to smuggle arbitrary text, or a secret that happens to look like an identifier
(``sk-proj-...``, ``ghp_...``, a JWT), past the policy.

A name that fails the check is *refused*: it is not registered (spans carry ``_OTHER`` in its place) and one
warning is logged that names the kind of name and the reason, never the name itself (it may be the secret).
The registry remembers refused names (bounded), so a name declared again on every run is neither checked nor
warned about again.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable, Mapping

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.fork import reinit_after_fork

NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,127}")
"""What a registrable tool or agent name looks like: an identifier-like token of at most 128 characters."""

DECLARED_NAME_PATTERN = re.compile(r"(?=.{1,128}\Z)[A-Za-z_][A-Za-z0-9_.\-]*(?: [A-Za-z0-9_.\-]+){0,3}")
"""What a name a framework's *definitions* declare may look like (``Agent(name="Triage agent")``): up to four
identifier-like words separated by single spaces, at most 128 characters. Only the framework integrations
register such names (they read them from code objects); :func:`register_names` and readers that rebuild a
registry from stored data accept :data:`NAME_PATTERN` only, so a stored name with spaces leaves a support
bundle as ``_OTHER`` (fail closed)."""

NAME_KEYS: Mapping[str, str] = {
    sc.GEN_AI_TOOL_NAME: "tool",
    "tool.name": "tool",
    sc.GEN_AI_AGENT_NAME: "agent",
    sc.AGENTDIAG_HANDOFF_SOURCE_AGENT: "agent",
    sc.AGENTDIAG_HANDOFF_TARGET_AGENT: "agent",
    sc.AGENTDIAG_GUARDRAIL_NAME: "guardrail",
}
"""Attributes whose values are registered names, and the kind of each (readers rebuild a registry from them)."""

MAX_NAMES = 10_000
"""At most this many names per kind are registered (and, separately, remembered as refused)."""

_logger = logging.getLogger(__name__)

SAFETY_REASON = "it fails the public-safety check (it looks like a credential, an e-mail address, a URL or a path)"
"""Why a name was refused, as the warning says it."""


def _is_sensitive(text: str) -> bool:
    """The public-safety check, :func:`otel_agentdiag.redaction.recognizers.is_sensitive`: the one definition every
    kept string meets. Imported at the first call, not with this module: the redaction package imports this
    module, and the check is only needed when a new name is registered."""
    from otel_agentdiag.redaction.recognizers import is_sensitive

    return is_sensitive(text)


class NameRegistry:
    """A thread-safe set of allowed tool, agent, model and guardrail names per kind (bounded in size)."""

    KINDS = ("tool", "agent", "model", "guardrail")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._names: dict[str, frozenset[str]] = {kind: frozenset() for kind in self.KINDS}
        self._refused: dict[str, frozenset[str]] = {kind: frozenset() for kind in self.KINDS}
        """Names refused by the public-safety check, per kind: not checked (nor warned about) again."""
        reinit_after_fork(self._at_fork_reinit)

    def _at_fork_reinit(self) -> None:
        """A lock held in the parent at the fork (a registration on another thread) is replaced in the child."""
        self._lock = threading.Lock()

    @staticmethod
    def _valid(kind: str, names: Iterable[str]) -> set[str]:
        """The names, each checked against :data:`NAME_PATTERN`; ``ValueError`` for one that is not a bounded
        token. The message says which (kind and position), never the name: a malformed name may be a secret."""
        if isinstance(names, str):
            raise ValueError(f"expected a list of {kind} names, not a string")
        out = set()
        for index, name in enumerate(names):
            if not isinstance(name, str) or NAME_PATTERN.fullmatch(name) is None:
                raise ValueError(
                    f"not a registrable name (identifier-like, at most 128 characters): {kind} name #{index + 1}"
                )
            out.add(name)
        return out

    def _screen(self, kind: str, names: Iterable[str]) -> set[str]:
        """The ``names`` that pass the public-safety check. The others are refused: remembered (so they are not
        checked again) and counted in one warning that names ``kind`` and the reason, never a name."""
        current, refused = self._names[kind], self._refused[kind]
        safe: set[str] = set()
        new_refusals: set[str] = set()
        for name in names:
            if name in current:
                safe.add(name)  # it passed when it was registered
            elif name in refused:
                continue  # refused before, and warned about then
            elif _is_sensitive(name):
                new_refusals.add(name)
            else:
                safe.add(name)
        if new_refusals:
            with self._lock:
                merged = self._refused[kind] | new_refusals
                # Full: start afresh (a name refused long ago is then checked, and warned about, once more).
                self._refused[kind] = merged if len(merged) <= MAX_NAMES else frozenset(new_refusals)
            count = len(new_refusals)
            _logger.warning(
                "otel-agentdiag: %d %s name%s not registered: %s; spans carry %s instead",
                count,
                kind,
                " was" if count == 1 else "s were",
                SAFETY_REASON,
                sc.OTHER_VALUE,
            )
        return safe

    def register(
        self,
        *,
        tools: Iterable[str] = (),
        agents: Iterable[str] = (),
        models: Iterable[str] = (),
        guardrails: Iterable[str] = (),
    ) -> None:
        """Allow these names.

        Raises ``ValueError`` for a name that is not a bounded token (:data:`NAME_PATTERN`; nothing is
        registered then), and when a kind would exceed :data:`MAX_NAMES`. A well-formed name that fails the
        public-safety check is refused with a warning (see the module docstring) and the others are
        registered: registration is code, and code that declares a bad name must still run.
        """
        given = {"tool": tools, "agent": agents, "model": models, "guardrail": guardrails}
        valid = {kind: self._valid(kind, names) for kind, names in given.items()}  # all shapes before any effect
        new = {kind: self._screen(kind, names) for kind, names in valid.items() if names}
        with self._lock:
            for kind, names in new.items():
                # Copy-on-write: readers on the span path take the current frozenset without locking.
                current = self._names[kind]
                if names <= current:
                    continue
                if len(current | names) > MAX_NAMES:
                    raise ValueError(f"at most {MAX_NAMES} {kind} names can be registered")
                self._names[kind] = current | names

    def is_registered(self, kind: str, name: object) -> bool:
        return name in self._names[kind]

    def is_tool(self, name: object) -> bool:
        return name in self._names["tool"]

    def is_agent(self, name: object) -> bool:
        return name in self._names["agent"]

    def register_found(self, found: Mapping[str, Iterable[str]]) -> None:
        """:meth:`register` from a ``{kind: names}`` mapping (kinds as in :data:`KINDS`)."""
        self.register(
            tools=sorted(found.get("tool", ())),
            agents=sorted(found.get("agent", ())),
            models=sorted(found.get("model", ())),
            guardrails=sorted(found.get("guardrail", ())),
        )

    def register_valid(self, kind: str, names: Iterable[object]) -> None:
        """Register the names a framework's definitions declare (agent, tool, guardrail objects: code), those
        that match :data:`DECLARED_NAME_PATTERN` and pass the public-safety check; a name of another shape is
        ignored, one that fails the check is refused with a warning (see the module docstring). Never raises
        for a name: a full registry leaves the rest unregistered (exported as ``_OTHER``)."""
        if kind not in self.KINDS:
            raise ValueError(f"unknown name kind {kind!r}")
        current = self._names[kind]
        shaped = {n for n in names if isinstance(n, str) and n not in current and DECLARED_NAME_PATTERN.fullmatch(n)}
        new = self._screen(kind, shaped) if shaped else shaped
        if not new:
            return
        with self._lock:
            merged = self._names[kind] | new
            if len(merged) > MAX_NAMES:
                return
            self._names[kind] = merged

    @property
    def tools(self) -> frozenset[str]:
        return self._names["tool"]

    @property
    def agents(self) -> frozenset[str]:
        return self._names["agent"]

    @property
    def models(self) -> frozenset[str]:
        return self._names["model"]

    @property
    def guardrails(self) -> frozenset[str]:
        return self._names["guardrail"]


default_registry = NameRegistry()
"""The process-wide registry used by the wrappers and, unless told otherwise, by the redacting processor."""
