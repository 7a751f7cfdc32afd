"""Policy files: build a :class:`~otel_agentdiag.redaction.allowlist.Policy` from TOML, and write one back.

A file extends a preset (``extends = "strict"``, the default; ``"local"``; or ``"none"``) and adds or removes
keys, each with a rule table such as ``{ type = "int", min = 0, max = 10 }``; ``key = false`` removes a key the
base allows. Keys may use closed ``{a,b}`` sets; a ``*`` pattern is accepted for compatibility (``agentdiag
policy`` warns about each and ``agentdiag doctor`` lists them: see
:func:`~otel_agentdiag.redaction.allowlist.open_patterns`). Every problem is a
:class:`~otel_agentdiag.redaction.rules.PolicyError` naming the file and the setting. The format is documented
in ``docs/policy.md``.
"""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from otel_agentdiag.redaction.allowlist import Policy
from otel_agentdiag.redaction.presets import PRESETS
from otel_agentdiag.redaction.rules import (
    Boolean,
    ClosedSet,
    Enum,
    FloatRange,
    HashedId,
    IntRange,
    PolicyError,
    RegisteredName,
    Rule,
    Scalar,
    StringArray,
    Token,
)

_RULE_FIELDS: Final[Mapping[str, frozenset[str]]] = {
    "enum": frozenset({"values"}),
    "closed_set": frozenset({"values", "max_items"}),
    "bool": frozenset(),
    "int": frozenset({"min", "max"}),
    "float": frozenset({"min", "max"}),
    "token": frozenset({"pattern", "max_length"}),
    "string_array": frozenset({"pattern", "max_length", "max_items"}),
    "scalar": frozenset({"max_length"}),
    "hashed_id": frozenset({"id_kind"}),
    "registered_name": frozenset({"name_kind"}),
}
_FILE_KEYS: Final = frozenset(
    {
        "name",
        "extends",
        "allowed_keys",
        "allowed_span_names",
        "allowed_events",
        "resource_keys",
        "scope_keys",
        "blocked_values",
        "hash_function",
        "summary",
        "exception_fingerprint",
        "on_error",
    }
)


def _require(spec: Mapping[str, Any], name: str, kind: type | tuple[type, ...], where: str) -> Any:
    if name not in spec:
        raise PolicyError(f"{where}: missing {name!r}")
    value = spec[name]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise PolicyError(f"{where}: {name!r} has the wrong type ({type(value).__name__})")
    return value


def rule_from_spec(spec: Mapping[str, Any], where: str = "rule") -> Rule:
    """Build a rule from its policy-file table, e.g. ``{type = "int", min = 0, max = 100}``."""
    if not isinstance(spec, Mapping):
        raise PolicyError(f'{where}: a rule is a table such as {{ type = "int", min = 0, max = 10 }}')
    kind = spec.get("type")
    if not isinstance(kind, str) or kind not in _RULE_FIELDS:
        raise PolicyError(f"{where}: 'type' must be one of {', '.join(_RULE_FIELDS)}, not {kind!r}")
    extra = set(spec) - _RULE_FIELDS[kind] - {"type"}
    if extra:
        raise PolicyError(f"{where}: unknown field(s) for a {kind} rule: {', '.join(sorted(extra))}")
    where = f"{where} ({kind})"
    if kind == "enum":
        values = _require(spec, "values", list, where)
        if not values or not all(isinstance(v, (str, bool)) for v in values):
            raise PolicyError(f"{where}: 'values' must be a non-empty list of strings or booleans")
        return Enum(frozenset(values))
    if kind == "closed_set":
        values = _require(spec, "values", list, where)
        if not values or not all(isinstance(v, str) and v for v in values):
            raise PolicyError(f"{where}: 'values' must be a non-empty list of non-empty strings")
        max_items = spec.get("max_items")
        if max_items is not None and (type(max_items) is not int or max_items < 1):
            raise PolicyError(f"{where}: 'max_items' must be a positive integer (omit it for a single string)")
        return ClosedSet(frozenset(values), max_items)
    if kind == "bool":
        return Boolean()
    if kind in ("int", "float"):
        number: type | tuple[type, ...] = int if kind == "int" else (int, float)
        low, high = _require(spec, "min", number, where), _require(spec, "max", number, where)
        if low > high or (kind == "float" and not (math.isfinite(low) and math.isfinite(high))):
            raise PolicyError(f"{where}: need finite min <= max")
        return IntRange(low, high) if kind == "int" else FloatRange(float(low), float(high))
    if kind in ("token", "string_array"):
        pattern = _require(spec, "pattern", str, where)
        max_length = _require(spec, "max_length", int, where)
        if max_length < 1:
            raise PolicyError(f"{where}: 'max_length' must be positive")
        try:
            item = Token(re.compile(pattern), max_length)
        except re.error as exc:
            raise PolicyError(f"{where}: 'pattern' is not a regular expression: {exc}") from None
        if kind == "token":
            return item
        max_items = _require(spec, "max_items", int, where)
        if max_items < 1:
            raise PolicyError(f"{where}: 'max_items' must be positive")
        return StringArray(item, max_items)
    if kind == "scalar":
        max_length = spec.get("max_length", 256)
        if not isinstance(max_length, int) or isinstance(max_length, bool) or max_length < 1:
            raise PolicyError(f"{where}: 'max_length' must be a positive integer")
        return Scalar(max_length)
    if kind == "hashed_id":
        id_kind = _require(spec, "id_kind", str, where)
        if not re.fullmatch(r"[a-z][a-z0-9_]{0,31}", id_kind):
            raise PolicyError(f"{where}: 'id_kind' must be a short lower-case identifier")
        return HashedId(id_kind)
    name_kind = _require(spec, "name_kind", str, where)
    try:
        return RegisteredName(name_kind)
    except ValueError as exc:
        raise PolicyError(f"{where}: {exc}") from None


def _rules(table: Any, where: str) -> dict[str, Rule | None]:
    if not isinstance(table, Mapping):
        raise PolicyError(f"{where} must be a table of key = rule")
    out: dict[str, Rule | None] = {}
    for key, spec in table.items():
        if spec is False:
            out[key] = None  # remove a key the base policy allows
        else:
            out[key] = rule_from_spec(spec, f"{where}.{key!r}")
    return out


def policy_from_dict(data: Mapping[str, Any], *, source: str = "policy") -> Policy:
    """Build a policy from the parsed contents of a policy file (see :func:`load_policy`)."""
    unknown = set(data) - _FILE_KEYS
    if unknown:
        raise PolicyError(f"{source}: unknown setting(s): {', '.join(sorted(unknown))}")
    base_name = data.get("extends", "strict")
    if base_name == "none":
        base = Policy(name="none", allowed_keys={}, on_error="tombstone")
    elif isinstance(base_name, str) and base_name in PRESETS:
        base = PRESETS[base_name]
    else:
        raise PolicyError(f"{source}: 'extends' must be one of strict, local, none, not {base_name!r}")
    changes: dict[str, Any] = {}
    for table in ("allowed_keys", "resource_keys", "scope_keys"):
        if table in data:
            changes[table] = _rules(data[table], f"{source}: {table}")
    if "allowed_span_names" in data:
        names = data["allowed_span_names"]
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise PolicyError(f"{source}: allowed_span_names must be a list of strings")
        changes["allowed_span_names"] = base.allowed_span_names | frozenset(names)
    if "allowed_events" in data:
        events = data["allowed_events"]
        if not isinstance(events, Mapping) or not all(
            isinstance(v, list) and all(isinstance(k, str) for k in v) for v in events.values()
        ):
            raise PolicyError(f"{source}: allowed_events must be a table of event name = [attribute keys]")
        changes["allowed_events"] = {**base.allowed_events, **{k: frozenset(v) for k, v in events.items()}}
    if "blocked_values" in data:
        blocked = data["blocked_values"]
        if not isinstance(blocked, list) or not all(isinstance(b, str) for b in blocked):
            raise PolicyError(f"{source}: blocked_values must be a list of regular expressions")
        changes["blocked_values"] = base.blocked_values + tuple(blocked)
    for setting, kind in (("hash_function", str), ("summary", str), ("on_error", str), ("exception_fingerprint", bool)):
        if setting in data:
            if not isinstance(data[setting], kind):
                raise PolicyError(f"{source}: {setting} must be a {kind.__name__}")
            changes[setting] = data[setting]
    name = data.get("name", f"{base.name}+{Path(source).stem}" if source != "policy" else f"{base.name}+custom")
    if not isinstance(name, str) or not name:
        raise PolicyError(f"{source}: name must be a non-empty string")
    try:
        return base.derive(name, **changes)
    except PolicyError as exc:
        raise PolicyError(f"{source}: {exc}") from None


def load_policy(path: str | os.PathLike[str]) -> Policy:
    """Read a TOML policy file. Raises :class:`PolicyError` (with the file and the setting) on any problem."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on Python 3.10 only
        import tomli as tomllib  # type: ignore[import-not-found,no-redef,unused-ignore]
    source = str(path)
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except OSError as exc:
        raise PolicyError(f"cannot read policy file {source}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(f"policy file {source} is not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:  # tomllib decodes the bytes itself and lets this through
        raise PolicyError(f"policy file {source} is not UTF-8 text (byte {exc.start})") from None
    except RecursionError:  # tomllib parses nested arrays and inline tables recursively
        raise PolicyError(f"policy file {source} nests arrays or tables too deeply") from None
    return policy_from_dict(data, source=source)


def resolve_policy(spec: Policy | str | os.PathLike[str]) -> Policy:
    """A policy from a :class:`Policy`, a preset name (``strict``, ``local``) or the path of a TOML file."""
    if isinstance(spec, Policy):
        return spec
    if isinstance(spec, str) and spec in PRESETS:
        return PRESETS[spec]
    if isinstance(spec, (str, os.PathLike)):
        return load_policy(spec)
    raise PolicyError(f"a policy is a Policy, 'strict', 'local' or a file path, not {type(spec).__name__}")


def policy_to_dict(policy: Policy) -> dict[str, Any]:
    """The policy as a policy-file table with ``extends = "none"`` (round-trips through :func:`policy_from_dict`)."""

    def rules(table: Mapping[str, Rule]) -> dict[str, Any]:
        return {key: table[key].to_spec() for key in sorted(table)}

    return {
        "name": policy.name,
        "extends": "none",
        "allowed_keys": rules(policy.allowed_keys),
        "allowed_span_names": sorted(policy.allowed_span_names),
        "allowed_events": {k: sorted(v) for k, v in sorted(policy.allowed_events.items())},
        "resource_keys": rules(policy.resource_keys),
        "scope_keys": rules(policy.scope_keys),
        "blocked_values": list(policy.blocked_values),
        "hash_function": policy.hash_function,
        "summary": policy.summary,
        "exception_fingerprint": policy.exception_fingerprint,
        "on_error": policy.on_error,
    }
