"""Convention adapters (design.md §6): other instrumentations' spans mapped onto our kinds, names and usage.

They run before redaction, on every destination.

One module per convention, each a small pure function from a span's attributes to :class:`Mapped`:
:mod:`.genai` (the official GenAI conventions), :mod:`.openinference` (Arize's OpenInference),
:mod:`.openllmetry` (Traceloop's OpenLLMetry); :mod:`.adapter` dispatches and rebuilds the span;
:mod:`.owners` keeps one owner per model call when a peer and we trace the same one.
"""

from otel_agentdiag.pipeline.adapters._common import Mapped
from otel_agentdiag.pipeline.adapters.adapter import DUPLICATE_LLM_CALL, ConventionAdapter, map_span
from otel_agentdiag.pipeline.adapters.owners import Enclosing, LLMCallOwners

__all__ = ["DUPLICATE_LLM_CALL", "ConventionAdapter", "Enclosing", "LLMCallOwners", "Mapped", "map_span"]
