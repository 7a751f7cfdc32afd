"""Reason codes: why redaction removed or changed a value (the suffix of the ``agentdiag.redaction.*`` counters).

Every outcome other than "kept as is" has one; the processor counts them on the span as
``agentdiag.redaction.<reason>`` and never records the value (nor, outside ``summary="debug"``, the key).
"""

from __future__ import annotations

from typing import Final

from otel_agentdiag._internal import reason_codes

UNKNOWN_KEY: Final = "unknown_key"
"""The key is not in the policy."""
INVALID_VALUE: Final = "invalid_value"
"""The key is allowed but the value breaks its rule: wrong type, out of range, not in the enum, bad shape. The
value is dropped, except under a :class:`~otel_agentdiag.redaction.rules.ClosedSet` rule, where an unknown string
becomes ``_OTHER``."""
TOO_LONG: Final = "too_long"
"""The value is longer (characters, or items of an array) than its rule allows."""
PUBLIC_SAFETY_VIOLATION: Final = reason_codes.PUBLIC_SAFETY_VIOLATION
"""The value looks like a credential, personal data (an e-mail address, a card number, an IBAN, ...), a URL or an
absolute path, holds a random-looking token, or matches ``blocked_values``. A resource value refused so is counted
on every span of that resource."""
UNREGISTERED_NAME: Final = reason_codes.UNREGISTERED_NAME
"""A tool/agent/model name that code did not register; replaced by ``_OTHER``."""
REDACTOR_ERROR: Final = reason_codes.REDACTOR_ERROR
"""A rule or callback raised: the span became a tombstone (or was dropped); the original never left."""
HASHED: Final = "hashed"
"""A correlation ID (or, with ``exception_fingerprint``, an exception message) replaced by its keyed digest."""
EVENT_DROPPED: Final = "event"
"""An event whose name the policy does not allow."""
SPAN_NAME: Final = "span_name"
"""The span name was rebuilt from the redacted attributes or replaced by ``_OTHER``."""
STATUS_DESCRIPTION: Final = "status_description"
"""A status description (free text, often the exception message) was removed."""
SCHEMA_URL: Final = "schema_url"
"""The span's resource or instrumentation scope named a schema URL other than an OpenTelemetry one
(``https://opentelemetry.io/schemas/<version>``); it was removed. Counted on every span of that resource or scope."""

REASONS: Final = (
    UNKNOWN_KEY,
    INVALID_VALUE,
    TOO_LONG,
    PUBLIC_SAFETY_VIOLATION,
    UNREGISTERED_NAME,
    REDACTOR_ERROR,
    HASHED,
    EVENT_DROPPED,
    SPAN_NAME,
    STATUS_DESCRIPTION,
    SCHEMA_URL,
)
