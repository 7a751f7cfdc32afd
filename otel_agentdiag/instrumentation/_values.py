"""Small, total readers of SDK objects and call arguments: a value of the wrong type is absent, never coerced."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from otel_agentdiag import semconv as sc


def as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def as_count(value: Any) -> int | None:
    """A token count, turn or step number: a non-negative int (not a bool), else ``None``."""
    return value if type(value) is int and value >= 0 else None


def as_float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def as_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


_NOT_GIVEN = frozenset({"NotGiven", "Omit"})


def given(value: Any) -> bool:
    """Whether an optional SDK argument was passed: not ``None`` and not the SDKs' ``omit`` / ``NOT_GIVEN``
    markers (``openai._types.Omit``, ``anthropic._types.NotGiven``, ...), recognised by name, not imported."""
    if value is None:
        return False
    cls = type(value)
    return cls.__name__ not in _NOT_GIVEN or not cls.__module__.endswith("._types")


def given_arguments(kwargs: Mapping[str, Any], roles: Iterable[tuple[str, str]]) -> list[tuple[str, Any]]:
    """(content role, value) of each (content role, argument name) of ``roles`` whose argument was passed
    (:func:`given`), in that order: a request's content as the content recorder takes it."""
    return [(role, kwargs[name]) for role, name in roles if given(kwargs.get(name))]


def put(attributes: dict[str, Any], key: str, value: Any) -> None:
    """Set ``key`` unless ``value`` is ``None``."""
    if value is not None:
        attributes[key] = value


def server_attributes(instance: Any) -> dict[str, Any]:
    """``server.address``/``server.port`` from the client behind an SDK resource.

    Reads the resource's ``_client.base_url``: the one attribute of the SDKs' resource objects this package
    reads that is not documented API. Anything unexpected there yields no attributes.
    """
    client = getattr(instance, "_client", None)
    url = getattr(client, "base_url", None)
    host = getattr(url, "host", None)
    if not isinstance(host, str) or not host:
        return {}
    out: dict[str, Any] = {sc.SERVER_ADDRESS: host}
    port = as_int(getattr(url, "port", None))
    if port is None:
        scheme = getattr(url, "scheme", None)
        port = 443 if scheme == "https" else 80 if scheme == "http" else None
    put(out, sc.SERVER_PORT, port)
    return out


def field_of(value: Any, name: str) -> Any:
    """``value[name]`` of a mapping, else ``value.name`` (a framework's objects may arrive as either); ``None``
    when absent."""
    return value.get(name) if isinstance(value, Mapping) else getattr(value, name, None)


def get(obj: Any, name: str) -> Any:
    """``obj.name`` or ``obj[name]`` (SDK models and plain dicts alike); ``None`` when absent."""
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


RAW_RESPONSE_TYPES = frozenset({"LegacyAPIResponse", "APIResponse", "AsyncAPIResponse"})
"""Class names of the SDKs' ``with_raw_response`` results."""
_MAX_RAW_BODY = 1 << 24


def raw_answer(response: Any) -> Any:
    """The answer inside a ``with_raw_response`` result of the openai or anthropic SDK (``LegacyAPIResponse``,
    ``APIResponse``, recognised by class name, not imported): its JSON body as a dict, when the SDK has already
    read it (a non-streamed call). Anything else is returned as it is; a raw response whose body is unread (a
    stream, ``with_streaming_response``) or is not a JSON object gives ``None``: it is never read here, so the
    caller's response is left exactly as the SDK returned it."""
    if type(response).__name__ not in RAW_RESPONSE_TYPES:
        return response
    try:
        body = response.http_response.content  # httpx raises ResponseNotRead for an unread body; never reads it
        if not isinstance(body, bytes) or len(body) > _MAX_RAW_BODY:
            return None
        parsed = json.loads(body)
    except Exception:  # noqa: BLE001 - unread, not JSON, or not the shape we know: nothing to read
        return None
    return parsed if isinstance(parsed, dict) else None
