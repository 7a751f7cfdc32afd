"""The registry of tool, agent and model names that are code, not data.

Names declared through ``@tool``/``@agent``, ``agent_run(name)`` or ``register_names()`` land here; the
redacting processor replaces any other tool or agent name with a fixed placeholder. A name is registered
only if it is a bounded token, so the registry cannot be used to smuggle arbitrary text past the policy.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable

NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,127}")
"""What a registrable tool or agent name looks like: an identifier-like token of at most 128 characters."""

MAX_NAMES = 10_000


class NameRegistry:
    """A thread-safe set of allowed tool, agent and model names per kind (bounded in size)."""

    KINDS = ("tool", "agent", "model")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._names: dict[str, frozenset[str]] = {kind: frozenset() for kind in self.KINDS}

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

    def register(self, *, tools: Iterable[str] = (), agents: Iterable[str] = (), models: Iterable[str] = ()) -> None:
        """Allow these names; raises ``ValueError`` for a name that is not a bounded token (nothing is
        registered then)."""
        new = {"tool": self._valid(tools), "agent": self._valid(agents), "model": self._valid(models)}
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

    @property
    def tools(self) -> frozenset[str]:
        return self._names["tool"]

    @property
    def agents(self) -> frozenset[str]:
        return self._names["agent"]

    @property
    def models(self) -> frozenset[str]:
        return self._names["model"]


default_registry = NameRegistry()
"""The process-wide registry used by the wrappers and, unless told otherwise, by the redacting processor."""
