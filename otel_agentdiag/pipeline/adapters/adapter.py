"""``ConventionAdapter``: the stage between the queue and the redactor that maps foreign spans onto our model.

Pipeline (design.md §6): sequencer → **adapters** → batch → redact → export. It runs on each destination's
batch worker, just before the redactor (:func:`otel_agentdiag.pipeline.worker._finished_spans`), never on the
agent's thread. Per span:

1. ours (it carries ``agentdiag.kind``): returned as it is, after one dict lookup;
2. a span of a convention we read (OpenInference, OpenLLMetry, the GenAI conventions, tried in that order, since
   the first two may also carry ``gen_ai.*`` keys): a copy with ``agentdiag.kind``, our keys beside its own,
   usage on leaves only, and a fixed name where our model has one (guardrails, framework steps);
3. anything else: returned as it is (the redactor names it ``_OTHER``, kind ``other``).

Usage on leaves only, never twice: a mapped span that is not an LLM call loses its token counts (roll-ups are
ours: ``agentdiag.usage.*`` on our runs and iterations); a peer's LLM span of a call one of our LLM spans owns
(:mod:`~otel_agentdiag.pipeline.adapters.owners`) becomes a step of kind ``other`` (type
``duplicate_llm_call``) without usage. Nothing is ever added that the span did not carry, except closed
constants (kinds, operation names, span types) and, on a mapped LLM leaf that is not a duplicate, its
``agentdiag.cost.usd`` when the price table prices its provider, model and usage (:mod:`otel_agentdiag.cost`).
With a content recorder (the local branch, with ``capture_content=True``), the content keys of a mapped LLM or
tool span become its captured content, beside the span as ours is. Never raises: a span whose mapping fails goes
on unmapped (the redactor still applies the whole policy to it) and is counted in :attr:`ConventionAdapter.failed`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import Status, StatusCode

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal.declared import register_tools, tool_names_in_attributes
from otel_agentdiag._internal.errors import log_internal_error
from otel_agentdiag._internal.names import default_registry
from otel_agentdiag._internal.sdk import attribute_dict, span_attributes
from otel_agentdiag._internal.spans import with_attributes
from otel_agentdiag.cost.pricing import cost_usd
from otel_agentdiag.pipeline.adapters import genai, openinference, openllmetry
from otel_agentdiag.pipeline.adapters._common import LEAF_USAGE_KEYS, OPERATION_KINDS, Mapped
from otel_agentdiag.pipeline.adapters.hints import step_hint
from otel_agentdiag.pipeline.adapters.normalise import normalise
from otel_agentdiag.pipeline.adapters.owners import Enclosing, LLMCallOwners

if TYPE_CHECKING:
    from otel_agentdiag.content.recorder import ContentRecorder

__all__ = ["DUPLICATE_LLM_CALL", "ConventionAdapter", "map_span"]

DUPLICATE_LLM_CALL = "duplicate_llm_call"
"""``agentdiag.framework.span_type`` of a peer's LLM span for a model call one of our LLM spans owns."""

_KIND = sc.AGENTDIAG_KIND
_OI_KIND = openinference.SPAN_KIND
_TL_KIND = openllmetry.SPAN_KIND
_TL_REQUEST = openllmetry.REQUEST_TYPE
_OPERATION = sc.GEN_AI_OPERATION_NAME
_SPAN_TYPE = sc.AGENTDIAG_FRAMEWORK_SPAN_TYPE
_COST = sc.AGENTDIAG_COST_USD
_FAILED = Status(StatusCode.ERROR)
_DECLARING_KINDS = frozenset({sc.KIND_LLM, sc.KIND_RUN})
"""Mapped spans whose tool definitions are read (``_internal.declared.tool_names_in_attributes``)."""


def map_span(attributes: Mapping[str, Any], name: str, scope: str | None = None) -> Mapped | None:
    """What a span with these attributes (and this name, from this instrumentation scope) is in our model; None:
    ours, or no convention we read. Pure."""
    if _KIND in attributes:
        return None
    if _OI_KIND in attributes:
        return openinference.adapt(attributes, name, scope)
    if _TL_KIND in attributes or _TL_REQUEST in attributes:
        return openllmetry.adapt(attributes, scope)
    if _OPERATION in attributes:
        return genai.adapt(attributes, scope)
    return None


class ConventionAdapter:
    """Map the foreign spans of a batch onto our model (see the module doc). One per destination (it remembers
    the parents of our LLM spans it saw); for one worker. ``owners``: the foreign spans that started inside one
    of our model calls (the sequencer fills it); None: only peer spans *around* ours are found.

    Counters (monotonic): ``adapted`` spans mapped, ``duplicates`` of them peer copies of our LLM calls,
    ``failed`` spans whose mapping raised (passed on unmapped).
    """

    def __init__(self, owners: LLMCallOwners | None = None, *, content: ContentRecorder | None = None) -> None:
        self.owners = owners
        self.content = content
        """The local branch only, with ``capture_content=True``: a mapped span's content keys become its captured
        content (still never attributes: the policy drops them as on every branch)."""
        self.enclosing = Enclosing()
        """The parents of our LLM spans seen so far: a peer's LLM span among them wraps one of our calls."""
        self.adapted = 0
        self.duplicates = 0
        self.failed = 0

    def process(self, spans: list[ReadableSpan]) -> tuple[list[ReadableSpan], list[tuple[str | None, str]]]:
        """The batch worker's first stage (:class:`~otel_agentdiag.pipeline.worker.Stage`): every span mapped
        (:meth:`adapt_batch`), none rejected."""
        return self.adapt_batch(spans), []

    def adapt_batch(self, spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
        """Each span, mapped when it is foreign and of a convention we read; the same object otherwise."""
        out: list[ReadableSpan] = []
        kind, llm, enclosing = _KIND, sc.KIND_LLM, self.enclosing
        for span in spans:
            ours = attribute_dict(span_attributes(span)).get(kind)
            if ours is not None:  # ours: the cheap path
                if ours == llm:
                    enclosing.saw_ours(span)  # ends before a peer's span around it: remembered for that one
                out.append(span)
                continue
            out.append(self.adapt(span))
        return out

    def adapt(self, span: ReadableSpan) -> ReadableSpan:
        """``span`` mapped onto our model, or ``span`` itself (ours, or unknown). Never raises."""
        try:
            attributes = attribute_dict(span_attributes(span))
            scope = span.instrumentation_scope
            mapped = map_span(attributes, span.name, None if scope is None else scope.name)
            if mapped is None:
                return span
            if mapped.agents:
                default_registry.register_valid("agent", mapped.agents)  # names the instrumentor took from code
            if mapped.tools:
                default_registry.register_valid("tool", mapped.tools)
            if mapped.kind in _DECLARING_KINDS:
                # The tools a request offered the model (on an LLM span), or an agent declares (Semantic Kernel's
                # run span), are code: registered before any tool span using them is judged (tools end later).
                register_tools(tool_names_in_attributes(attributes))
            duplicate = mapped.kind == sc.KIND_LLM and self._duplicate(span)
            # A step the trace's rebuild made of it (a wrapper run, a model or tool call seen twice), or one its
            # convention maps to a step though it names a call's operation (Google ADK's merge of parallel calls).
            step = DUPLICATE_LLM_CALL if duplicate else step_hint(span) or _call_named_step(attributes, mapped)
            adapted = _rebuild(span, attributes, mapped, step)
            content = self.content
            if content is not None and mapped.content and step is None:  # a duplicate's content is ours already
                content.attach(adapted, _content_items(attributes, mapped.content))
        except Exception as exc:  # noqa: BLE001 - unmapped, the span still meets the whole policy
            self.failed += 1
            log_internal_error("mapping a span's conventions", exc)
            return span
        self.adapted += 1
        if duplicate:
            self.duplicates += 1
        return adapted

    def _duplicate(self, span: ReadableSpan) -> bool:
        """Whether a peer's LLM span is one of our model calls seen again: inside ours, or around ours."""
        owners = self.owners
        return (owners is not None and owners.is_inside(span)) or self.enclosing.encloses_ours(span)


def _call_named_step(attributes: Mapping[str, Any], mapped: Mapped) -> str | None:
    """The step type of a span its convention maps to a framework step (kind ``other``, named and typed as one)
    though it names a call's operation, which it must lose (it is no call: it would be named, counted and metered
    as one); None for any other span."""
    if (
        mapped.kind == sc.KIND_OTHER
        and mapped.name == sc.FRAMEWORK_SPAN_NAME
        and mapped.span_type is not None
        and attributes.get(_OPERATION) in OPERATION_KINDS
    ):
        return mapped.span_type
    return None


def _content_items(attributes: Mapping[str, Any], keys: tuple[tuple[str, str], ...]) -> tuple[tuple[str, Any], ...]:
    """``(role, value)`` for each content key the span carries (the first key of a role wins)."""
    found: dict[str, Any] = {}
    for key, role in keys:
        if role not in found:
            value = attributes.get(key)
            if value is not None:
                found[role] = value
    return tuple(found.items())


def _exception_type(span: ReadableSpan) -> str | None:
    """The ``exception.type`` of the span's last ``exception`` event (how most instrumentations record a
    failure without ``error.type``), or None. The policy judges it as it judges ``error.type``."""
    for event in reversed(span.events):
        if event.name == sc.EXCEPTION_EVENT_NAME:
            value = (event.attributes or {}).get(sc.EXCEPTION_TYPE)
            return value if type(value) is str and 0 < len(value) <= 256 else None
    return None


def _rebuild(span: ReadableSpan, attributes: Mapping[str, Any], mapped: Mapped, step: str | None) -> ReadableSpan:
    out = dict(attributes)
    kind = mapped.kind
    name = mapped.name
    span_type = mapped.span_type
    for key, value in mapped.set.items():
        if key not in out:
            out[key] = value
    normalise(out)
    if step is not None:
        kind, name, span_type = sc.KIND_OTHER, sc.FRAMEWORK_SPAN_NAME, step
        out.pop(_OPERATION, None)  # one model call, tool call or run: one span of its kind
        out.pop(_OI_KIND, None)  # also for OpenInference readers
        out.pop(_SPAN_TYPE, None)
    if kind == sc.KIND_ITERATION:
        out.pop(_OPERATION, None)  # ours have none: a loop step is named `agent.iteration`, not by its operation
    if kind != sc.KIND_LLM:
        for key in LEAF_USAGE_KEYS.intersection(out):
            del out[key]
    elif _COST not in out:
        cost = cost_usd(out, span.start_time)  # a peer's model call, priced from its mapped provider, model, usage
        if cost is not None:
            out[_COST] = cost
    if kind == sc.KIND_OTHER and name is None and _OPERATION not in out:
        name = sc.FRAMEWORK_SPAN_NAME
    if span_type is not None and _SPAN_TYPE not in out:
        out[_SPAN_TYPE] = span_type
    out[_KIND] = kind
    if sc.ERROR_TYPE not in out and span.status.status_code is StatusCode.ERROR:
        error_type = _exception_type(span)
        if error_type is not None:
            out[sc.ERROR_TYPE] = error_type  # what our spans say of a failure, from the span's own exception event
    if span.status.status_code is StatusCode.UNSET and type(out.get(sc.ERROR_TYPE)) is str and kind != sc.KIND_OTHER:
        # A call that names its error but left its status unset (AG2's tool calls): it failed, as the conventions
        # say `error.type` means. The status says so without a description (the message is data).
        return with_attributes(span, out, name, status=_FAILED)
    return with_attributes(span, out, name)
