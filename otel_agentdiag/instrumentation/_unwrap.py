"""Taking our wrapper off a method wherever it sits in a chain of ``wrapt`` wrappers, leaving the others.

OpenTelemetry's ``unwrap(obj, name)`` replaces the attribute with the outermost wrapper's ``__wrapped__``: right when
ours is the outermost, wrong when another instrumentor (OpenInference, OpenLLMetry) wrapped the same method after
us. Then it takes the peer's wrapper off and leaves ours on, still tracing after ``uninstrument()``. Here our
wrapper is found by identity (the wrapper function we passed to ``wrap_function_wrapper``) and spliced out; the
wrappers above and below it stay, in order.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from wrapt import FunctionWrapper

_logger = logging.getLogger(__name__)

_MAX_DEPTH = 64
"""Wrappers looked through before giving up (a chain this long is a bug elsewhere)."""


def unwrap_ours(target: Any, name: str, wrapper: Callable[..., Any]) -> bool:
    """Remove the ``wrapt`` wrapper of ``target.name`` whose wrapper function is ``wrapper``.

    True when it was found and removed. False when it is not there (already removed, or the attribute was
    replaced), or when a wrapper above ours is not a ``wrapt`` proxy and cannot be re-pointed: ours then stays
    and a debug line says so (it keeps tracing; nothing breaks)."""
    node = vars(target).get(name)
    parent: FunctionWrapper[Any, Any] | None = None
    for _ in range(_MAX_DEPTH):
        if not isinstance(node, FunctionWrapper):
            if parent is None or node is None:
                return False
            _logger.debug("otel-agentdiag: %s.%s is wrapped by something that is not wrapt; left as is", target, name)
            return False
        if getattr(node, "_self_wrapper", None) is wrapper:
            inner = node.__wrapped__
            if parent is None:
                setattr(target, name, inner)
            else:
                parent.__wrapped__ = inner
            return True
        parent, node = node, node.__wrapped__
    return False
