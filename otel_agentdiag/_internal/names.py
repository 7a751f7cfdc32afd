"""The registry of tool and agent names that are code, not data.

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
    """A thread-safe set of allowed tool and agent names (bounded in size)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tools: frozenset[str] = frozenset()
        self._agents: frozenset[str] = frozenset()

    @staticmethod
    def _valid(names: Iterable[str]) -> set[str]:
        out = set()
        for name in names:
            if not isinstance(name, str) or NAME_PATTERN.fullmatch(name) is None:
                raise ValueError(f"not a registrable name (identifier-like, at most 128 characters): {name!r}")
            out.add(name)
        return out

    def register(self, *, tools: Iterable[str] = (), agents: Iterable[str] = ()) -> None:
        """Allow these names; raises ``ValueError`` for a name that is not a bounded token."""
        new_tools, new_agents = self._valid(tools), self._valid(agents)
        with self._lock:
            # Copy-on-write: readers on the span path take the current frozenset without locking.
            if not new_tools <= self._tools:
                if len(self._tools) + len(new_tools) > MAX_NAMES:
                    raise ValueError(f"at most {MAX_NAMES} tool names can be registered")
                self._tools = self._tools | new_tools
            if not new_agents <= self._agents:
                if len(self._agents) + len(new_agents) > MAX_NAMES:
                    raise ValueError(f"at most {MAX_NAMES} agent names can be registered")
                self._agents = self._agents | new_agents

    def is_tool(self, name: object) -> bool:
        return name in self._tools

    def is_agent(self, name: object) -> bool:
        return name in self._agents

    @property
    def tools(self) -> frozenset[str]:
        return self._tools

    @property
    def agents(self) -> frozenset[str]:
        return self._agents


default_registry = NameRegistry()
"""The process-wide registry used by the wrappers and, unless told otherwise, by the redacting processor."""
