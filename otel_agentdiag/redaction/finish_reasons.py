"""The closed set of finish reasons: why a model stopped, as the providers document it.

``gen_ai.response.finish_reasons`` (and OpenInference's ``llm.finish_reason``) keep only these values; any
other item becomes ``_OTHER`` in its place (an array keeps its length, so reasons still line up with choices)
and is counted as ``invalid_value``. A provider's own word for "why" is a short enumeration; anything else in
that field (a made-up reason, a user's name, a number) is data.

Values are taken as each provider's API returns them. Gemini and Cohere document upper-case enumerations that
instrumentations also report lower-cased, so both spellings are listed for those.
"""

from __future__ import annotations

from typing import Final

_SEMCONV: Final = ("stop", "length", "content_filter", "tool_call", "error")
"""The GenAI semantic conventions' ``finish_reason`` of an output message (gen-ai-output-messages.json)."""

_OPENAI: Final = (
    # Chat Completions / Completions ``choices[].finish_reason``.
    "stop",
    "length",
    "tool_calls",
    "content_filter",
    "function_call",
    # Responses API: ``incomplete_details.reason``; our instrumentation reports ``incomplete`` when it is absent.
    "max_output_tokens",
    "max_messages",
    "steered",
    "incomplete",
)
_ANTHROPIC: Final = (
    # Messages API ``stop_reason``.
    "end_turn",
    "max_tokens",
    "stop_sequence",
    "tool_use",
    "pause_turn",
    "refusal",
    "model_context_window_exceeded",
)
_BEDROCK: Final = (
    # Converse API ``stopReason``.
    "end_turn",
    "tool_use",
    "max_tokens",
    "stop_sequence",
    "guardrail_intervened",
    "content_filtered",
    "model_context_window_exceeded",
)
_MISTRAL: Final = ("stop", "length", "model_length", "error", "tool_calls")
_DEEPSEEK: Final = ("insufficient_system_resource",)
_GEMINI: Final = (
    # ``Candidate.finish_reason`` (google-genai / Vertex AI FinishReason).
    "FINISH_REASON_UNSPECIFIED",
    "STOP",
    "MAX_TOKENS",
    "SAFETY",
    "RECITATION",
    "LANGUAGE",
    "OTHER",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "SPII",
    "MALFORMED_FUNCTION_CALL",
    "IMAGE_SAFETY",
    "IMAGE_PROHIBITED_CONTENT",
    "IMAGE_RECITATION",
    "IMAGE_OTHER",
    "NO_IMAGE",
    "UNEXPECTED_TOOL_CALL",
    "TOO_MANY_TOOL_CALLS",
    "MODEL_ARMOR",
)
_COHERE: Final = (
    # Chat API v2 ``finish_reason``, and v1's.
    "COMPLETE",
    "STOP_SEQUENCE",
    "MAX_TOKENS",
    "TOOL_CALL",
    "ERROR",
    "TIMEOUT",
    "ERROR_TOXIC",
    "ERROR_LIMIT",
    "USER_CANCEL",
)

FINISH_REASONS: Final[frozenset[str]] = frozenset(
    _SEMCONV
    + _OPENAI
    + _ANTHROPIC
    + _BEDROCK
    + _MISTRAL
    + _DEEPSEEK
    + _GEMINI
    + tuple(v.lower() for v in _GEMINI)
    + _COHERE
    + tuple(v.lower() for v in _COHERE)
)
"""Every documented finish reason: the only values ``gen_ai.response.finish_reasons`` items may take."""
