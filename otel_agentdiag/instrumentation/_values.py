"""Small, total readers of SDK objects and call arguments: a value of the wrong type is absent, never coerced."""

from __future__ import annotations

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


def get(obj: Any, name: str) -> Any:
    """``obj.name`` or ``obj[name]`` (SDK models and plain dicts alike); ``None`` when absent."""
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)
