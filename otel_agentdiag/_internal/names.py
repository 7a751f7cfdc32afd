"""The registry of tool, agent and model names that are code, not data.

Names declared through ``@tool``/``@agent``, ``agent_run(name)``, ``register_names()`` or a framework's own
tool, agent and guardrail definitions land here; the redacting processor replaces any other tool, agent or
guardrail name with a fixed placeholder. A name is registered only if it is a bounded token (see
:data:`NAME_PATTERN` and :data:`DECLARED_NAME_PATTERN`), so the registry cannot be used to smuggle arbitrary
text past the policy.
"""

from __future__ import annotations

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


class NameRegistry:
    """A thread-safe set of allowed tool, agent, model and guardrail names per kind (bounded in size)."""

    KINDS = ("tool", "agent", "model", "guardrail")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._names: dict[str, frozenset[str]] = {kind: frozenset() for kind in self.KINDS}
        reinit_after_fork(self._at_fork_reinit)

    def _at_fork_reinit(self) -> None:
        """A lock held in the parent at the fork (a registration on another thread) is replaced in the child."""
        self._lock = threading.Lock()

    @staticmethod
    def _valid(names: Iterable[str]) -> set[str]:
        if isinstance(names, str):
            raise ValueError(f"expected a list of names, not the string {names!r}")
        out = set()
        for name in names:
            if not isinstance(name, str) or NAME_PATTERN.fullmatch(name) is None:
                raise ValueError(f"not a registrable name (identifier-like, at most 128 characters): {name!r}")
            out.add(name)
        return out

    def register(
        self,
        *,
        tools: Iterable[str] = (),
        agents: Iterable[str] = (),
        models: Iterable[str] = (),
        guardrails: Iterable[str] = (),
    ) -> None:
        """Allow these names; raises ``ValueError`` for a name that is not a bounded token (nothing is
        registered then)."""
        new = {
            "tool": self._valid(tools),
            "agent": self._valid(agents),
            "model": self._valid(models),
            "guardrail": self._valid(guardrails),
        }
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
        that match :data:`DECLARED_NAME_PATTERN`; anything else is ignored. Never raises: a full registry
        leaves the rest unregistered (exported as ``_OTHER``)."""
        if kind not in self.KINDS:
            raise ValueError(f"unknown name kind {kind!r}")
        current = self._names[kind]
        new = {n for n in names if isinstance(n, str) and n not in current and DECLARED_NAME_PATTERN.fullmatch(n)}
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
