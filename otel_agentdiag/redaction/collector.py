"""A redaction policy as the OpenTelemetry Collector's ``redaction`` processor config (defence in depth).

:func:`collector_redaction_config` turns a :class:`~otel_agentdiag.redaction.Policy` (the strict preset by
default) into the block that goes under ``processors: redaction:`` of ``otel/opentelemetry-collector-contrib``
(``collector-config/otelcol.yaml`` holds it; ``agentdiag policy --collector`` prints it; a test keeps the two
equal). It targets the processor as released in contrib v0.165.0.

What the processor can mirror, and how:

- ``allow_all_keys: false`` and ``allowed_keys``: an attribute whose key is not listed is removed. The processor
  applies one list to resource, span and span-event attributes, so the list is the union of our span/event keys
  and our resource keys. It matches keys *exactly*, as the presets do (they name every key, see
  :mod:`~otel_agentdiag.redaction.keys`). A ``*`` pattern of a custom policy is expanded into the concrete keys
  of :data:`KNOWN_PATTERN_KEYS` when it is one of the enumerated families (``gen_ai.usage.*`` and the like); a
  key a pattern would allow but the catalogue does not name is removed by the Collector: the limitation errs on
  the private side. :func:`unexpanded_patterns` lists the patterns of a custom policy that the catalogue does
  not know (``agentdiag policy --collector`` warns about them).
- ``blocked_values``: our public-safety check (hidden characters, credentials, personal data, URLs, absolute
  paths) as one RE2 expression per format (:data:`PUBLIC_SAFETY_PATTERNS`), plus the policy's own
  ``blocked_values``. For ASCII text they flag every string :func:`~otel_agentdiag.redaction.recognizers.is_sensitive`
  flags by a format (and the few candidates it clears with a check RE2 cannot run, such as a card number's Luhn
  digit, an IBAN's mod-97 digits or an Azure key's entropy; not the random-token step, which counts), but
  the processor *masks the match* instead of dropping the value, so the expressions extend their match over the
  whole token (the rest of the URL, the path, the bearer token, the PEM block; all of a value with a hidden
  character).
- ``hash_function``: ``hmac-sha256`` with ``hmac_key: ${env:AGENTDIAG_COLLECTOR_HASH_KEY}`` for a keyed policy
  (HMAC arrived in the processor in early 2026, contrib PR #45715); ``sha3`` (SHA3-256, unkeyed) for
  ``hash_function="sha256"``. The Collector then hashes what it masks instead of writing ``****``. The key is the
  Collector's own secret: the processor reads it from the environment, this package never does.
- ``blocked_key_patterns``: the correlation-ID keys (``hashed_id`` rules). The processor masks, and so hashes,
  the whole value of such a key: a raw conversation or user id from a service without our SDK leaves the
  Collector as an HMAC. ``allowed_values`` lets our SDK's digests (``hmac-sha256:<key id>:<64 hex>``) through
  unchanged, so they keep their algorithm tag and key id and still join across spans (the processor checks
  ``allowed_values`` before the blocked keys and values; ``tests/e2e/test_docker_backends.py`` checks the result).
- ``summary``: the same words (``info`` counts, ``debug`` also names keys, ``silent``).

What it cannot mirror (our SDK does these before export; the Collector is a second line for foreign spans):

- value rules: types, ranges, enumerations, token shapes, lengths; registered tool/agent names (``_OTHER``);
- the random-token step of the public-safety check (:mod:`~otel_agentdiag.redaction.entropy`): RE2 cannot
  measure entropy;
- span names (its ``url_sanitizer``/``db_sanitizer`` only rewrite URL- and SQL-shaped names; both are off
  here), event names (it filters event *attributes*, not events), status descriptions, link attributes,
  instrumentation-scope attributes, resource and scope schema URLs and W3C ``tracestate``;
- keyed digests in our format: its HMAC is plain ``hex(HMAC-SHA256(key, value))``, with no kind separation, no
  key id and no ``hmac-sha256:`` tag. Use a different key from the SDK's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from otel_agentdiag import semconv as sc
from otel_agentdiag.redaction import keys as _keys
from otel_agentdiag.redaction import recognizers
from otel_agentdiag.redaction.allowlist import Policy
from otel_agentdiag.redaction.formats import FORMATS
from otel_agentdiag.redaction.presets import STRICT
from otel_agentdiag.redaction.reasons import REASONS
from otel_agentdiag.redaction.rules import HashedId, PolicyError, Rule

COLLECTOR_CONTRIB_VERSION: Final = "0.165.0"
"""The ``otel/opentelemetry-collector-contrib`` release the generated block (and ``collector-config/``) targets."""

COLLECTOR_HASH_KEY_ENV: Final = "AGENTDIAG_COLLECTOR_HASH_KEY"
"""The Collector's environment variable holding its HMAC key (read by the Collector, not by this package)."""

_HMAC_KEY_REFERENCE: Final = "${env:" + COLLECTOR_HASH_KEY_ENV + "}"

PUBLIC_SAFETY_PATTERNS: Final[tuple[str, ...]] = (
    "(?s:.*)" + recognizers.HIDDEN_CHARACTERS + "(?s:.*)",  # a hidden character: the whole value
    *(fmt.pattern for fmt in FORMATS),
)
"""The public-safety check (:func:`~otel_agentdiag.redaction.recognizers.is_sensitive`) as RE2 expressions: one
for hidden characters (it masks the whole value), then the expression of each format of
:data:`~otel_agentdiag.redaction.formats.FORMATS`, written for both engines. For ASCII text they flag every string
``is_sensitive`` flags, and exactly what ``recognise(text, confirm=False)`` flags: the few candidates the SDK then
clears with a check RE2 cannot express (a card number's Luhn digit, a phone number's digit count, an IPv6
address that does not parse, loopback addresses) are masked by the Collector, the private side. The Collector
does not fold Unicode (full-width or look-alike letters): that part of the check is the SDK's alone. Each
expression extends its match over the whole token (the rest of the URL, the path, the bearer token, the PEM
block), because the Collector masks matches."""

KNOWN_PATTERN_KEYS: Final[Mapping[str, tuple[str, ...]]] = {
    sc.AGENTDIAG_REDACTION_PREFIX + "*": _keys.redaction_counter_keys(REASONS),
    sc.GEN_AI_USAGE_PREFIX + "*": _keys.GEN_AI_USAGE_KEYS,
    sc.AGENTDIAG_USAGE_PREFIX + "*": _keys.AGENTDIAG_USAGE_KEYS,
    "llm.token_count.*": _keys.OPENINFERENCE_TOKEN_COUNT_KEYS,
    "telemetry.sdk.*": tuple(k for k in _keys.TELEMETRY_RESOURCE_KEYS if k.startswith("telemetry.sdk.")),
    "telemetry.distro.*": tuple(k for k in _keys.TELEMETRY_RESOURCE_KEYS if k.startswith("telemetry.distro.")),
}
"""The concrete keys a ``*`` pattern over one of the enumerated families stands for in the Collector (which
matches keys exactly): the same keys the presets name."""

_DIGEST_SHAPES: Final[Mapping[str, str]] = {
    "hmac-sha256": r"^hmac-sha256:[0-9a-f]{8}:[0-9a-f]{64}$",
    "sha256": r"^sha256:[0-9a-f]{64}$",
}
"""Our digests, whole-value anchored: ``allowed_values`` lets them through the Collector unchanged."""

_COLLECTOR_HASH: Final[Mapping[str, str]] = {"hmac-sha256": "hmac-sha256", "sha256": "sha3"}

_RE2_MISSING: Final[tuple[tuple[str, str], ...]] = (
    (r"\(\?[=!]", "lookahead"),
    (r"\(\?<[=!]", "lookbehind"),
    (r"\(\?<", "'(?<' group (lookbehind, or a named group older RE2 versions reject)"),
    (r"\(\?P=", "named backreference"),
    (r"\\[1-9]", "backreference"),
    (r"\(\?>", "atomic group"),
    (r"\(\?\(", "conditional group"),
    (r"[*+?}]\+", "possessive quantifier"),
    (r"\\Z", r"'\Z' (use '\z' or '$')"),
)


def re2_incompatibility(expression: str) -> str | None:
    """What in ``expression`` Go's RE2 (the Collector's regexp engine) lacks, or ``None`` when nothing does.

    A conservative textual check: it may refuse an escaped look-alike, never accept a lookaround or a
    backreference.
    """
    for construct, what in _RE2_MISSING:
        if re.search(construct, expression):
            return what
    return None


def _expand(table: Mapping[str, Rule], allowed: Callable[[str], Rule | None]) -> tuple[set[str], list[str]]:
    """Exact keys of ``table`` plus the catalogued keys of its patterns that ``allowed`` still accepts."""
    keys = {key for key in table if "*" not in key}
    unexpanded: list[str] = []
    for pattern in sorted(key for key in table if "*" in key):
        known = KNOWN_PATTERN_KEYS.get(pattern)
        if known is None:
            unexpanded.append(pattern)
            continue
        keys.update(key for key in known if allowed(key) is not None)
    return keys, unexpanded


def unexpanded_patterns(policy: Policy = STRICT) -> tuple[str, ...]:
    """The ``*`` patterns of ``policy`` without catalogued keys: the Collector removes what they would allow."""
    _, span = _expand(policy.allowed_keys, policy.rule_for)
    _, resource = _expand(policy.resource_keys, policy.resource_rule_for)
    return tuple(sorted(set(span) | set(resource)))


def collector_keys(policy: Policy = STRICT) -> list[str]:
    """Every attribute key the Collector should keep for ``policy``: span, event and resource keys, sorted."""
    span, _ = _expand(policy.allowed_keys, policy.rule_for)
    resource, _ = _expand(policy.resource_keys, policy.resource_rule_for)
    events = {key for keys in policy.allowed_events.values() for key in keys if policy.rule_for(key) is not None}
    return sorted(span | resource | events)


def _hashed_keys(policy: Policy, keys: Iterable[str]) -> list[str]:
    return sorted(key for key in keys if isinstance(policy.rule_for(key), HashedId))


def collector_redaction_config(policy: Policy = STRICT) -> dict[str, Any]:
    """The ``redaction`` processor block for ``policy``: plain data, deterministic (keys and lists sorted).

    Raises :class:`~otel_agentdiag.redaction.PolicyError` when one of the policy's ``blocked_values``
    cannot run in RE2. See the module docstring for what maps to what, and what the Collector cannot do.
    """
    blocked = set(PUBLIC_SAFETY_PATTERNS)
    for expression in policy.blocked_values:
        problem = re2_incompatibility(expression)
        if problem is not None:
            raise PolicyError(f"blocked_values: {expression!r} cannot run in the Collector: RE2 has no {problem}")
        blocked.add(expression)
    keys = collector_keys(policy)
    config: dict[str, Any] = {
        "allow_all_keys": False,
        "allowed_keys": keys,
        "allowed_values": [_DIGEST_SHAPES[policy.hash_function]],
        "blocked_key_patterns": ["^" + re.escape(key) + "$" for key in _hashed_keys(policy, keys)],
        "blocked_values": sorted(blocked),
        "hash_function": _COLLECTOR_HASH[policy.hash_function],
        "summary": policy.summary,
    }
    if policy.hash_function == "hmac-sha256":
        config["hmac_key"] = _HMAC_KEY_REFERENCE
    return dict(sorted(config.items()))
