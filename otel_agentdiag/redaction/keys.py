"""The enumerated attribute keys the presets allow where a convention names a family of keys.

A key is data too: what an allowed ``*`` would match becomes part of the exported key, so a pattern such as
``gen_ai.usage.*`` lets ``gen_ai.usage.customer_4111111111111111`` (or any id, e-mail address or word written
into a key) leave with its value. The presets therefore name every key of these families one by one, from the
conventions that define them and the instrumentations known to emit them; a key outside these tuples is an
``unknown_key``. Each tuple says where its keys come from. Adding a key here is the way to let a new one out
(``tests/redaction/test_enumerated_keys.py`` checks what our own instrumentation and the peers emit).

No rules here (the policy gives each family its rule), so ``collector.py`` and ``describe.py`` can use the same
tuples. :func:`expand_key` is the closed way to name a family in a policy: ``{a,b}`` sets, never a wildcard.
"""

from __future__ import annotations

import itertools
import re
from typing import Final

from otel_agentdiag import semconv as sc

GEN_AI_USAGE_KEYS: Final[tuple[str, ...]] = (
    # The GenAI semantic conventions (open-telemetry/semantic-conventions-genai, model/gen-ai/registry.yaml).
    sc.GEN_AI_USAGE_INPUT_TOKENS,
    sc.GEN_AI_USAGE_OUTPUT_TOKENS,
    sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
    sc.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
    sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS,
    "gen_ai.usage.text.input_tokens",
    "gen_ai.usage.image.input_tokens",
    "gen_ai.usage.audio.input_tokens",
    "gen_ai.usage.video.input_tokens",
    "gen_ai.usage.text.output_tokens",
    "gen_ai.usage.audio.output_tokens",
    # opentelemetry-util-genai (the official GenAI instrumentations) and the Anthropic SDK's own tracing.
    "gen_ai.usage.cache_write.input_tokens",
    "gen_ai.usage.image.output_tokens",
    "gen_ai.usage.text.cache_read.input_tokens",
    "gen_ai.usage.image.cache_read.input_tokens",
    "gen_ai.usage.audio.cache_read.input_tokens",
    # Older semantic conventions and OpenLLMetry (opentelemetry-semantic-conventions-ai).
    "gen_ai.usage.prompt_tokens",
    "gen_ai.usage.completion_tokens",
    "gen_ai.usage.total_tokens",
    "gen_ai.usage.cache_read_input_tokens",
    "gen_ai.usage.cache_creation_input_tokens",
    "gen_ai.usage.reasoning_tokens",
)
"""Token counts under ``gen_ai.usage.``: the leaf usage of one model call."""

ROLLUP_USAGE_SUFFIXES: Final[tuple[str, ...]] = (
    "input_tokens",
    "output_tokens",
    "cache_read.input_tokens",
    "cache_creation.input_tokens",
    "reasoning.output_tokens",
)
"""What the framework integrations roll up (``instrumentation/_framework.py``: ``gen_ai.usage.X`` summed into
``agentdiag.usage.X`` on run and iteration spans)."""

AGENTDIAG_USAGE_KEYS: Final[tuple[str, ...]] = tuple(sc.AGENTDIAG_USAGE_PREFIX + s for s in ROLLUP_USAGE_SUFFIXES)
"""Our roll-up keys, one per rolled-up leaf key."""

OPENINFERENCE_TOKEN_COUNT_KEYS: Final[tuple[str, ...]] = (
    # openinference-semantic-conventions (SpanAttributes.LLM_TOKEN_COUNT_*).
    "llm.token_count.prompt",
    "llm.token_count.completion",
    "llm.token_count.total",
    "llm.token_count.prompt_details.cache_read",
    "llm.token_count.prompt_details.cache_write",
    "llm.token_count.prompt_details.cache_input",
    "llm.token_count.prompt_details.audio",
    "llm.token_count.completion_details.reasoning",
    "llm.token_count.completion_details.audio",
)
"""OpenInference's token counts."""

TELEMETRY_RESOURCE_KEYS: Final[tuple[str, ...]] = (
    # The OpenTelemetry resource semantic conventions (telemetry.sdk.*, telemetry.distro.*).
    "telemetry.sdk.name",
    "telemetry.sdk.language",
    "telemetry.sdk.version",
    "telemetry.distro.name",
    "telemetry.distro.version",
)
"""The resource attributes an OpenTelemetry SDK or distribution sets about itself."""


def redaction_counter_keys(reasons: tuple[str, ...]) -> tuple[str, ...]:
    """``agentdiag.redaction.<reason>`` for exactly ``reasons`` (the policy's reason codes)."""
    return tuple(sc.AGENTDIAG_REDACTION_PREFIX + reason for reason in reasons)


# --- key syntax: {a,b} sets (closed) and * patterns (open) -----------------------------------------------------
_KEY_SEGMENTS: Final = r"[A-Za-z0-9_\-]+(?:\.[A-Za-z0-9_\-]+)*"


def key_pattern(pattern: str) -> re.Pattern[str]:
    """The expression for a key with ``*``: each ``*`` matches one or more dot-separated identifier segments;
    everything else is literal.

    A ``*`` is *open*: what it matches becomes part of an exported key, and a key-shaped segment can still be
    data (``app.customer_4111111111111111``, ``app.jane_doe_example_com``). It is held to the shape of a key (no
    spaces, ``@``, ``/``, ``:`` or other characters of prose, addresses, URLs or paths; the policy also bounds
    the key's length and runs the public-safety check on it), which stops the obvious cases only. The presets
    use no ``*``; policy files may, for compatibility (``agentdiag policy`` warns about each); ``{a,b}`` sets
    (:func:`expand_key`) are the closed alternative.
    """
    return re.compile(_KEY_SEGMENTS.join(re.escape(part) for part in pattern.split("*")))


MAX_KEY_SET: Final = 256
"""At most this many keys from one key with ``{...}`` sets (a guard against a product that explodes)."""

_SET = re.compile(r"\{([^{}]*)\}")
_ALTERNATIVE = re.compile(r"[A-Za-z0-9_\-]+(?:\.[A-Za-z0-9_\-]+)*")
"""One alternative of a set: key-shaped text (segments joined by dots), never empty, never a ``*``."""


def expand_key(key: str) -> tuple[str, ...]:
    """The keys a policy key stands for: itself, or with ``{a,b,...}`` sets each key they spell.

    ``gen_ai.usage.{input,output}_tokens`` stands for ``gen_ai.usage.input_tokens`` and
    ``gen_ai.usage.output_tokens``; several sets multiply (``a.{b,c}.{d,e}`` is four keys). A set is closed:
    only what it lists is allowed, unlike a ``*``. Raises :class:`ValueError` for an empty, nested or unbalanced
    set, an alternative that is not key-shaped, or more than :data:`MAX_KEY_SET` keys.
    """
    if "{" not in key and "}" not in key:
        return (key,)
    pieces = _SET.split(key)  # literal, set, literal, set, ..., literal
    literals, sets = pieces[0::2], pieces[1::2]
    if any("{" in text or "}" in text for text in literals):
        raise ValueError(f"{key!r}: a '{{' or '}}' without its pair, or a set inside a set")
    choices: list[tuple[str, ...]] = []
    for text in sets:
        alternatives = tuple(dict.fromkeys(part.strip() for part in text.split(",")))
        if not all(_ALTERNATIVE.fullmatch(part) for part in alternatives):
            raise ValueError(f"{key!r}: each item of a {{...}} set is a non-empty key segment such as input_tokens")
        choices.append(alternatives)
    count = 1
    for alternatives in choices:
        count *= len(alternatives)
    if count > MAX_KEY_SET:
        raise ValueError(f"{key!r} stands for {count} keys; at most {MAX_KEY_SET}")
    out = []
    for picked in itertools.product(*choices):
        parts = [literals[0]]
        for alternative, literal in zip(picked, literals[1:], strict=True):
            parts += [alternative, literal]
        out.append("".join(parts))
    return tuple(dict.fromkeys(out))
