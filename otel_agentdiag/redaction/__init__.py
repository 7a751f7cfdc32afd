"""Redaction: the policy (``policy``), keyed ID hashing (``hashing``) and the processor (``processor``)."""

from otel_agentdiag.redaction.hashing import IdHasher
from otel_agentdiag.redaction.policy import STRICT, Policy
from otel_agentdiag.redaction.processor import RedactingSpanProcessor, SpanRedactor

__all__ = ["STRICT", "IdHasher", "Policy", "RedactingSpanProcessor", "SpanRedactor"]
