"""``@tool`` and ``@agent``: run every call of a sync or async function inside a span of the manual wrappers.

With content capture on, a call's arguments (``{parameter: value}``, without ``self`` and ``cls``) and its result
or exception are kept beside the span, in the local store; with it off, the wrapper only opens the span.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar, overload

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal import content as _content
from otel_agentdiag._internal.names import default_registry
from otel_agentdiag.instrumentation._scopes import _AgentRun, _SpanScope, _ToolCall

__all__ = ["agent", "tool"]

F = TypeVar("F", bound=Callable[..., Any])


class _Arguments:
    """How a decorated function's call becomes captured arguments: ``{parameter: value}``, without ``self`` and
    ``cls``. The signature is read once, on the first call with content capture on."""

    __slots__ = ("_fn", "_signature")

    def __init__(self, fn: Callable[..., Any]) -> None:
        self._fn = fn
        self._signature: inspect.Signature | None = None

    def __call__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            if self._signature is None:
                self._signature = inspect.signature(self._fn)
            bound = self._signature.bind_partial(*args, **kwargs).arguments
            return {k: v for k, v in bound.items() if k not in ("self", "cls")}
        except (TypeError, ValueError):  # no signature, or a call the function itself will refuse
            return {"args": args, "kwargs": kwargs}


def _wrap(fn: F, scope: Callable[[], _SpanScope], decorator: str, roles: tuple[str, str]) -> F:
    """``roles``: the content roles of the function's arguments and of its result."""
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        raise TypeError(f"@{decorator} does not support generator functions; open a span inside the generator")
    arguments = _Arguments(fn)
    takes, gives = roles
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            with scope() as handle:
                if not _content.enabled():
                    return await fn(*args, **kwargs)
                handle._capture(takes, arguments(args, kwargs))
                try:
                    result = await fn(*args, **kwargs)
                except BaseException as exc:
                    handle._capture(gives, exc)
                    raise
                handle._capture(gives, result)
                return result

        return async_wrapper  # type: ignore[return-value]

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with scope() as handle:
            if not _content.enabled():
                return fn(*args, **kwargs)
            handle._capture(takes, arguments(args, kwargs))
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:
                handle._capture(gives, exc)
                raise
            handle._capture(gives, result)
            return result

    return wrapper  # type: ignore[return-value]


def _name_of(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


@overload
def tool(name: F) -> F: ...
@overload
def tool(name: str | None = None) -> Callable[[F], F]: ...
def tool(name: str | Callable[..., Any] | None = None) -> Any:
    """Decorate a sync or async function as a tool: each call runs in an ``execute_tool {name}`` span.

    The name (default: the function's ``__name__``) is registered as an allowed tool name at decoration time
    (as by :func:`register_names`: ``ValueError`` for a malformed name; one that fails the public-safety check
    is refused with a warning and exported as ``_OTHER``).
    Usable as ``@tool``, ``@tool()`` or ``@tool("get_weather")``. With content capture on, the call's
    arguments (``{parameter: value}``) and its result or exception are kept in the local store.
    """
    if callable(name):
        return tool(None)(name)

    def decorate(fn: F) -> F:
        tool_name = name or _name_of(fn)
        default_registry.register(tools=(tool_name,))
        return _wrap(
            fn, lambda: _ToolCall(tool_name, None), "tool", (sc.CONTENT_TOOL_ARGUMENTS, sc.CONTENT_TOOL_RESULT)
        )

    return decorate


@overload
def agent(name: F) -> F: ...
@overload
def agent(name: str | None = None) -> Callable[[F], F]: ...
def agent(name: str | Callable[..., Any] | None = None) -> Any:
    """Decorate a sync or async function as an agent: each call runs in an ``invoke_agent {name}`` span.

    The name (default: the function's ``__name__``) is registered as an allowed agent name (as by
    :func:`register_names`).
    """
    if callable(name):
        return agent(None)(name)

    def decorate(fn: F) -> F:
        agent_name = name or _name_of(fn)
        default_registry.register(agents=(agent_name,))
        return _wrap(
            fn,
            lambda: _AgentRun(agent_name, None, None, None),
            "agent",
            (sc.CONTENT_INPUT_MESSAGES, sc.CONTENT_OUTPUT_MESSAGES),
        )

    return decorate
