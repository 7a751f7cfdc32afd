"""Maps LangChain / LangGraph callbacks to OpenTelemetry GenAI spans.

LangChain reports every step of a run to its callback handlers: ``on_chain_start``/``on_chain_end``,
``on_chat_model_start``/``on_llm_end``, ``on_tool_start``/``on_tool_end`` (and ``*_error``), each with the step's
``run_id`` and its parent's ``parent_run_id``. :class:`AgentDiagCallbackHandler` builds the OpenTelemetry tree from
those ids (never from the ambient context):

=====================================  ================================  =============================================
LangChain run                          OpenTelemetry span                notes
=====================================  ================================  =============================================
outermost chain / graph (no parent,    ``invoke_agent {name}`` (run)     the run's ``name`` (``create_agent(name=...)``,
or a parent not traced here; or a                                        ``create_react_agent(name=...)``, a
chain run by a tool: a nested agent)                                     ``run_name``, ``LangGraph``); stop reason
LangGraph node (``langgraph_step``)    ``agent.iteration`` (iteration)   one per step of a run, shared by the step's
                                                                         nodes; ``agentdiag.iteration.index`` = step
any other chain, retriever             no span                           its children hang under its parent's span
chat model / LLM                       ``chat {model}`` (llm, CLIENT)    ``text_completion {model}`` for a plain LLM;
                                                                         usage, response model, finish reasons
tool                                   ``execute_tool {tool}`` (tool)    ``gen_ai.tool.call.id`` = ``tool_call_id``
a tool call answered without a tool    ``execute_tool {tool}`` (tool)    an unknown tool name (LangGraph's ToolNode
run (error ``ToolMessage`` only)                                         answers it without running anything)
=====================================  ================================  =============================================

**Iterations.** A step's iteration span starts with its first node run and ends at the time its last node run
ends; it is handed to the exporter when the next step starts (or the run ends), so a node of the same step that
starts late (parallel tasks on a thread pool) still finds it open and no step gets two spans.

**Outcomes.** A run that ends normally stops ``completed``; one whose chain fails stops ``error`` (status ERROR,
``error.type`` = the exception class), ``recursion_limit`` for LangGraph's ``GraphRecursionError`` and
``cancelled`` for a cancellation. A tool that fails has status ERROR and ``error.type`` whether the error kills the
run or is fed back to the model (``ToolNode(handle_tool_errors=True)``, ``handle_tool_error=True``: a
``ToolMessage`` with ``status="error"``); the run's own outcome says which it was.

**Correlation.** ``config["configurable"]["thread_id"]`` (LangGraph's conversation key, which LangChain copies into
the run's metadata), else ``metadata["conversation_id"]``, else ``metadata["session_id"]``, becomes
``gen_ai.conversation.id`` on every span of the run (hashed by the redacting processor).

**Names.** Only names from the user's definitions are registered (the redactor exports any other name as
``_OTHER``), and only if they pass the public-safety check. The tools bound to each chat model call
(``invocation_params["tools"]``, the agent's tool definitions) are registered as tool names; a tool span is named
by its tool's definition (``serialized["name"]``), never by a per-call ``run_name``. A run's name is what LangChain
reports: a per-call ``run_name`` (``config={"run_name": ...}``: data) or the runnable's own name, which the
callback cannot tell apart, so it registers neither: a LangGraph graph's own name (``compile(name=...)``,
``create_agent(name=...)``, ``create_react_agent(name=...)``) is registered by
:class:`~otel_agentdiag.instrumentation.langchain.LangChainInstrumentor`, which reads it from the graph object when
the graph runs. A per-call ``run_name``, a plain chain's name, and every run name under a handler passed by hand
without the instrumentor leave as ``_OTHER`` unless declared with ``register_names()``. A tool name seen only when
a tool runs, or only in a model's answer, is never registered.

**Content.** Nothing LangChain passes as content (messages, prompts, tool inputs and outputs, exception messages)
is put on a span; from a step's output only the error ``ToolMessage``\\ s' tool names and call ids are read.
With content capture on (``configure(capture_content=True)``) it is captured beside the spans, as LangChain
passes it: a run's input messages and output messages are the graph's ``inputs`` and ``outputs``; a chat span's
input messages are the messages sent (one prompt's list, else the list of lists; a system prompt is among them)
and its tool definitions the bound ``tools``; a ``text_completion`` span's input messages are the prompts; output
messages are the answers' messages (chat) or texts (completion), one prompt's answers as a flat list; a tool
span's arguments are the tool's ``inputs`` (else its input string) and its result what the tool returned, or
the exception it raised (a tool call answered without a tool run: the error ``ToolMessage``). Iterations carry
none.

The chat model and tool steps are made *active* while they run (the callbacks run inline, in the step's own
context): our OpenAI and Anthropic client instrumentations called by the model enrich its ``chat`` span instead of
starting a second one, and manual wrappers used inside a tool become children of its span.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Hashable, Iterator, Mapping, Sequence
from typing import Any
from uuid import UUID

from opentelemetry import trace
from opentelemetry.trace import SpanKind

from otel_agentdiag import semconv as sc
from otel_agentdiag._internal import content as _content
from otel_agentdiag._internal.errors import handle_internal_errors
from otel_agentdiag._internal.names import NameRegistry, default_registry
from otel_agentdiag.instrumentation._base import CANCELLATIONS, error_type_of
from otel_agentdiag.instrumentation._framework import Node, SpanTree
from otel_agentdiag.instrumentation._provider import tracer_for
from otel_agentdiag.instrumentation._values import as_count

try:  # langchain-core is an optional dependency: the module must import without it (for documentation tools)
    from langchain_core.callbacks import BaseCallbackHandler
except ImportError:  # pragma: no cover - exercised only without langchain-core
    BaseCallbackHandler = object  # type: ignore[assignment,misc]

__all__ = [
    "ERROR_TYPE_TOOL_ERROR",
    "ERROR_TYPE_TOOL_NOT_FOUND",
    "SCOPE",
    "AgentDiagCallbackHandler",
]

SCOPE = "otel_agentdiag.instrumentation.langchain"
"""Instrumentation scope of the spans (the same for the instrumentor and a handler made by hand)."""

PROVIDER = "langchain"
"""``gen_ai.provider.name`` of a model call whose model does not name its provider (``ls_provider``)."""

ERROR_TYPE_TOOL_ERROR = "langchain.tool_error"
"""``error.type`` of a tool call whose error reached the model as a ``ToolMessage(status="error")`` while LangChain
reported no exception (``handle_tool_error=True``, a middleware answering instead of the tool)."""

ERROR_TYPE_TOOL_NOT_FOUND = "langchain.tool_not_found"
"""``error.type`` of a tool call the model made to a tool the agent does not have."""


_ROOT, _STEP, _FOLD, _LLM, _TOOL = "root", "step", "fold", "llm", "tool"
_MAX_SCAN = 1_000
"""At most this many items of a step's output are looked at for error ``ToolMessage``\\ s."""


class _Run:
    """What the handler knows about one LangChain run: the node its children hang under, and its role."""

    __slots__ = ("node", "role", "start_ns")

    def __init__(self, node: Node, role: str) -> None:
        self.node = node
        self.role = role
        self.start_ns = time.time_ns()


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _run_name(serialized: Any, name: Any) -> str | None:
    """A chain's name: the ``name`` argument (LangChain's ``run_name`` or the runnable's name), else the
    serialized one (``serialized`` is ``None`` for LangGraph's runs)."""
    if _text(name):
        return str(name)
    if isinstance(serialized, Mapping):
        if _text(serialized.get("name")):
            return str(serialized["name"])
        ids = serialized.get("id")
        if isinstance(ids, Sequence) and ids and _text(ids[-1]):
            return str(ids[-1])
    return None


def _conversation_id(metadata: Mapping[str, Any] | None) -> str | None:
    if not metadata:
        return None
    for key in ("thread_id", "conversation_id", "session_id"):
        value = metadata.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and value != "":
            return str(value)
    return None


def _stop_reason(exc: BaseException) -> str:
    if any(cls.__name__ == "GraphRecursionError" for cls in type(exc).__mro__):
        return sc.STOP_RECURSION_LIMIT
    if type(exc).__name__ in CANCELLATIONS:
        return sc.STOP_CANCELLED
    return sc.STOP_ERROR


def _tool_names(tools: Any) -> list[str]:
    """The names of the tools bound to a model call: OpenAI format (``{"type": "function", "function": {"name":
    ...}}``), Anthropic format (``{"name": ...}``) or tool objects."""
    names: list[str] = []
    if not isinstance(tools, Sequence) or isinstance(tools, str):
        return names
    for tool in tools:
        if isinstance(tool, Mapping):
            function = tool.get("function")
            name = function.get("name") if isinstance(function, Mapping) else tool.get("name")
        else:
            name = getattr(tool, "name", None)
        if isinstance(name, str):
            names.append(name)
    return names


def _usage_attributes(usage: Any) -> dict[str, int]:
    """``gen_ai.usage.*`` from an ``AIMessage.usage_metadata``; what it does not report stays absent."""
    out: dict[str, int] = {}
    if not isinstance(usage, Mapping):
        return out
    for key, attribute in (
        ("input_tokens", sc.GEN_AI_USAGE_INPUT_TOKENS),
        ("output_tokens", sc.GEN_AI_USAGE_OUTPUT_TOKENS),
    ):
        value = as_count(usage.get(key))
        if value is not None:
            out[attribute] = value
    details = usage.get("input_token_details")
    if isinstance(details, Mapping):
        for key, attribute in (
            ("cache_read", sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS),
            ("cache_creation", sc.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS),
        ):
            value = as_count(details.get(key))
            if value is not None:
                out[attribute] = value
    details = usage.get("output_token_details")
    if isinstance(details, Mapping):
        value = as_count(details.get("reasoning"))
        if value is not None:
            out[sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] = value
    return out


def _legacy_usage(llm_output: Any) -> dict[str, int]:
    """``gen_ai.usage.*`` from ``LLMResult.llm_output["token_usage"]`` (plain LLMs that report no
    ``usage_metadata``)."""
    usage = llm_output.get("token_usage") if isinstance(llm_output, Mapping) else None
    out: dict[str, int] = {}
    if isinstance(usage, Mapping):
        prompt, completion = as_count(usage.get("prompt_tokens")), as_count(usage.get("completion_tokens"))
        if prompt is not None:
            out[sc.GEN_AI_USAGE_INPUT_TOKENS] = prompt
        if completion is not None:
            out[sc.GEN_AI_USAGE_OUTPUT_TOKENS] = completion
    return out


def _llm_end_attributes(response: Any) -> dict[str, Any]:
    """Response model, response id, finish reasons and usage of an ``LLMResult`` (the first prompt's answers)."""
    attributes: dict[str, Any] = {}
    generations = getattr(response, "generations", None)
    answers = generations[0] if isinstance(generations, Sequence) and generations else []
    finish_reasons: list[str] = []
    usage: dict[str, int] = {}
    for index, generation in enumerate(answers if isinstance(answers, Sequence) else ()):
        message = getattr(generation, "message", None)
        metadata = getattr(message, "response_metadata", None)
        metadata = metadata if isinstance(metadata, Mapping) else {}
        info = getattr(generation, "generation_info", None)
        info = info if isinstance(info, Mapping) else {}
        reason = metadata.get("finish_reason") or metadata.get("stop_reason") or info.get("finish_reason")
        if isinstance(reason, str):
            finish_reasons.append(reason)
        if index == 0:
            usage = _usage_attributes(getattr(message, "usage_metadata", None))
            model = _text(metadata.get("model_name")) or _text(metadata.get("model"))
            if model is not None:
                attributes[sc.GEN_AI_RESPONSE_MODEL] = model
            response_id = _text(metadata.get("id"))
            if response_id is not None:
                attributes[sc.GEN_AI_RESPONSE_ID] = response_id
    llm_output = getattr(response, "llm_output", None)
    if not usage:
        usage = _legacy_usage(llm_output)
    if sc.GEN_AI_RESPONSE_MODEL not in attributes and isinstance(llm_output, Mapping):
        model = _text(llm_output.get("model_name"))
        if model is not None:
            attributes[sc.GEN_AI_RESPONSE_MODEL] = model
    if finish_reasons:
        attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS] = tuple(finish_reasons)
    attributes.update(usage)
    return attributes


def _one_prompt(batch: Any) -> Any:
    """A model call's prompts (a list per prompt): the one prompt's list when there is one, else them all."""
    if isinstance(batch, Sequence) and not isinstance(batch, str) and len(batch) == 1:
        return batch[0]
    return batch


def _answers(response: Any) -> Any:
    """An ``LLMResult``'s answers: each generation's message (chat) or text (completion), a list per prompt,
    flattened when there is one prompt."""
    generations = getattr(response, "generations", None)
    if not isinstance(generations, Sequence):
        return None
    per_prompt = [
        [g.message if hasattr(g, "message") else getattr(g, "text", None) for g in answers]
        if isinstance(answers, Sequence)
        else []
        for answers in generations
    ]
    return _one_prompt(per_prompt)


def _error_tool_messages(outputs: Any) -> Iterator[Any]:
    """The ``ToolMessage``\\ s with ``status="error"`` in a step's output (a dict of channels, a list of
    ``Command``\\ s, a list of messages), looking at a bounded number of items."""
    budget = _MAX_SCAN
    stack: list[tuple[Any, int]] = [(outputs, 0)]
    while stack and budget > 0:
        item, depth = stack.pop()
        budget -= 1
        if getattr(item, "type", None) == "tool" and hasattr(item, "tool_call_id"):
            if getattr(item, "status", None) == "error":
                yield item
            continue
        if depth >= 4:
            continue
        if isinstance(item, Mapping):
            stack.extend((value, depth + 1) for value in reversed(list(item.values())[:budget]))
        elif isinstance(item, (list, tuple)):
            stack.extend((value, depth + 1) for value in reversed(item[:budget]))
        else:
            update = getattr(item, "update", None)  # a LangGraph Command
            if isinstance(update, (Mapping, list, tuple)):
                stack.append((update, depth + 1))


class AgentDiagCallbackHandler(BaseCallbackHandler):  # type: ignore[misc]
    """A LangChain callback handler that turns runs into OpenTelemetry GenAI spans (see the module docstring).

    Attached to every run by :class:`~otel_agentdiag.instrumentation.langchain.LangChainInstrumentor`, or passed by
    hand: ``agent.invoke(inputs, config={"callbacks": [AgentDiagCallbackHandler()]})`` (not both: two handlers make
    two spans per step). Never raises into LangChain: a failure is logged by type and the step stays untraced.
    """

    run_inline = True
    """Called in the run's own context, also under ``ainvoke`` (not in an executor thread): the model and tool
    steps are made active where their code runs."""
    raise_error = False

    def __init__(self, tracer_provider: trace.TracerProvider | None = None) -> None:
        super().__init__()
        self._tree = SpanTree(tracer_for(SCOPE, tracer_provider))
        self._names: NameRegistry = default_registry
        self._runs: dict[UUID, _Run] = {}
        self._lock = threading.Lock()
        self._enabled = True

    # LangChain skips the hooks of the kinds a handler ignores: these carry nothing the spans need. (Not
    # ignore_agent: it also switches off the tool hooks.)
    @property
    def ignore_retry(self) -> bool:
        return True

    @property
    def ignore_custom_event(self) -> bool:
        return True

    @property
    def open_spans(self) -> int:
        """How many LangChain runs are in progress (their spans not yet ended)."""
        with self._lock:
            return len(self._runs)

    def _take(self, run_id: UUID) -> _Run | None:
        """Forget what the handler knew about the run ``run_id`` (it ended), and return it."""
        with self._lock:
            return self._runs.pop(run_id, None)

    # -- chains -----------------------------------------------------------------------------------------
    def on_chain_start(
        self,
        serialized: dict[str, Any],
        inputs: dict[str, Any],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if not self._enabled:
            return
        with handle_internal_errors("starting a span for a LangChain run"):
            self._chain_start(serialized, inputs, run_id, parent_run_id, metadata, kwargs.get("name"))

    def on_chain_end(
        self,
        outputs: dict[str, Any],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        if not self._enabled:
            return
        with handle_internal_errors("ending a span for a LangChain run"):
            self._chain_end(run_id, outputs, None)

    def on_chain_error(
        self,
        error: BaseException,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        if not self._enabled:
            return
        with handle_internal_errors("ending a span for a LangChain run"):
            self._chain_end(run_id, None, error)

    def _chain_start(
        self,
        serialized: Any,
        inputs: Any,
        run_id: UUID,
        parent_run_id: UUID | None,
        metadata: dict[str, Any] | None,
        name: Any,
    ) -> None:
        tree = self._tree
        parent = tree.get(parent_run_id) if parent_run_id is not None else None
        if parent is None or parent.kind == sc.KIND_TOOL:
            parent_key = parent_run_id if parent is not None else None
            run = self._start_run(run_id, parent_key, _run_name(serialized, name), metadata)
            if run is not None and _content.enabled():
                run.capture(sc.CONTENT_INPUT_MESSAGES, inputs)
            return
        step = as_count(metadata.get("langgraph_step")) if metadata else None
        if parent.kind == sc.KIND_RUN and step is not None:
            self._start_step(run_id, parent, step)
            return
        # Prompt templates, RunnableSequence internals, LangGraph's inner chains, a subgraph: no span of their own.
        tree.alias(run_id, parent)
        with self._lock:
            self._runs[run_id] = _Run(parent, _FOLD)

    def _start_run(self, run_id: UUID, parent_key: UUID | None, name: str | None, metadata: Any) -> Node | None:
        attributes: dict[str, Any] = {sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT}
        if name is not None:
            # Not registered: a per-call run_name is data (see "Names" in the module docstring).
            attributes[sc.GEN_AI_AGENT_NAME] = name
        node = self._tree.start(
            run_id,
            parent_key,
            kind=sc.KIND_RUN,
            name=sc.OP_INVOKE_AGENT if name is None else f"{sc.OP_INVOKE_AGENT} {name}",
            attributes=attributes,
            conversation_id=_conversation_id(metadata if isinstance(metadata, Mapping) else None),
            activate=False,
        )
        if node is None:
            return None
        node.extra["iterations"] = {}  # step number -> iteration node
        node.extra["calls"] = set()  # tool call ids that got a tool span
        node.extra["tools"] = frozenset()  # the tool names bound to the latest model call
        with self._lock:
            self._runs[run_id] = _Run(node, _ROOT)
        return node

    def _start_step(self, run_id: UUID, run: Node, step: int) -> None:
        """A LangGraph node of ``run``: the iteration span of its step, started by the step's first node."""
        finished: list[Node] = []
        with self._lock:
            iterations: dict[int, Node] = run.extra["iterations"]
            for other, node in list(iterations.items()):
                if other != step and node.extra["open"] == 0:
                    finished.append(iterations.pop(other))
            iteration = iterations.get(step)
            if iteration is None:
                key: Hashable = ("agentdiag.iteration", run.key, step)
                iteration = self._tree.start(
                    key,
                    run.key,
                    kind=sc.KIND_ITERATION,
                    name=sc.ITERATION_SPAN_NAME,
                    attributes={sc.AGENTDIAG_ITERATION_INDEX: step},
                    activate=False,
                )
                if iteration is None:
                    return
                iteration.extra["open"] = 0
                iterations[step] = iteration
            iteration.extra["open"] += 1
            self._runs[run_id] = _Run(iteration, _STEP)
        self._tree.alias(run_id, iteration)
        for node in finished:
            self._end_iteration(node)

    def _end_iteration(self, node: Node) -> None:
        self._tree.end(node.key, end_time=node.extra.get("last_end_ns"))

    def _chain_end(self, run_id: UUID, outputs: Any, error: BaseException | None) -> None:
        record = self._take(run_id)
        if record is None:
            return
        node = record.node
        if record.role == _ROOT:
            if error is not None:
                if node.error_type is None:
                    node.error_type = error_type_of(error)
                node.stop_reason = _stop_reason(error)
            elif node.stop_reason is None:
                node.stop_reason = sc.STOP_COMPLETED
            if error is None and _content.enabled():
                node.capture(sc.CONTENT_OUTPUT_MESSAGES, outputs)
            self._end_run(node, None if error is None else error_type_of(error))
        elif record.role == _STEP:
            if error is not None and node.error_type is None:
                node.error_type = error_type_of(error)
            if error is None:
                with handle_internal_errors("reading a LangGraph step's tool answers"):
                    self._unrun_tool_calls(run_id, record, outputs)
            self._tree.forget(run_id)
            with self._lock:
                node.extra["open"] -= 1
                if node.extra["open"] == 0:
                    # Ended when the next step starts or the run ends, at this time: a node of this step that
                    # starts late (parallel tasks) still finds its iteration open.
                    node.extra["last_end_ns"] = time.time_ns()
        else:
            self._tree.forget(run_id)

    def _end_run(self, run: Node, leftover_error: str | None) -> None:
        """End ``run`` and, children first, whatever under it is still open: finished iterations at the time
        their last node ended, anything else with ``leftover_error``."""
        with self._lock:
            finished = {id(node) for node in run.extra.get("iterations", {}).values() if node.extra["open"] == 0}
            nodes: dict[int, Node] = {id(node): node for node in run.extra.get("iterations", {}).values()}
            for run_id, record in list(self._runs.items()):
                if record.node is run or any(ancestor is run for ancestor in record.node.ancestors()):
                    del self._runs[run_id]
                    if record.node is not run:
                        nodes[id(record.node)] = record.node
            run.extra["iterations"] = {}

        def depth(node: Node) -> int:
            return sum(1 for _ in node.ancestors())

        for node in sorted(nodes.values(), key=depth, reverse=True):
            if id(node) in finished:
                self._end_iteration(node)
            else:
                self._tree.end(node.key, error_type=leftover_error)
        self._tree.end(run.key)

    def _unrun_tool_calls(self, run_id: UUID, record: _Run, outputs: Any) -> None:
        """Tool calls a step answered with an error ``ToolMessage`` without running a tool (an unknown tool
        name): a tool span each, from the step's start to now."""
        iteration = record.node
        run = iteration.nearest(sc.KIND_RUN)
        if run is None:
            return
        for message in _error_tool_messages(outputs):
            call_id = _text(getattr(message, "tool_call_id", None))
            if call_id is None:
                continue
            with self._lock:
                seen: set[str] = run.extra["calls"]
                if call_id in seen:
                    continue
                seen.add(call_id)
                declared: frozenset[str] = run.extra["tools"]
            tool = _text(getattr(message, "name", None))
            key = ("agentdiag.tool_message", run_id, call_id)
            node = self._tree.start(
                key,
                iteration.key,
                kind=sc.KIND_TOOL,
                name=sc.OP_EXECUTE_TOOL if tool is None else f"{sc.OP_EXECUTE_TOOL} {tool}",
                attributes=self._tool_attributes(tool, call_id),
                start_time=record.start_ns,
                activate=False,
            )
            if node is not None and _content.enabled():
                node.capture(sc.CONTENT_TOOL_RESULT, message)  # what the model got back instead of a result
            unknown = declared and tool not in declared
            self._tree.end(key, error_type=ERROR_TYPE_TOOL_NOT_FOUND if unknown else ERROR_TYPE_TOOL_ERROR)

    # -- retrievers: no span, their children hang under their parent -----------------------------------
    def on_retriever_start(
        self,
        serialized: dict[str, Any],
        query: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if not self._enabled:
            return
        with handle_internal_errors("following a LangChain retriever run"):
            parent = self._tree.get(parent_run_id) if parent_run_id is not None else None
            if parent is not None:
                self._tree.alias(run_id, parent)
                with self._lock:
                    self._runs[run_id] = _Run(parent, _FOLD)

    def on_retriever_end(
        self, documents: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        if not self._enabled:
            return
        with handle_internal_errors("following a LangChain retriever run"):
            self._chain_end(run_id, None, None)

    def on_retriever_error(
        self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        self.on_retriever_end(None, run_id=run_id)

    # -- model calls ------------------------------------------------------------------------------------
    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[Any]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if not self._enabled:
            return
        with handle_internal_errors("starting a span for a LangChain model call"):
            params = kwargs.get("invocation_params")
            node = self._llm_start(sc.OP_CHAT, run_id, parent_run_id, metadata, params)
            if node is not None and _content.enabled():
                node.capture(sc.CONTENT_INPUT_MESSAGES, _one_prompt(messages))
                tools = params.get("tools") if isinstance(params, Mapping) else None
                if tools:
                    node.capture(sc.CONTENT_TOOL_DEFINITIONS, tools)

    def on_llm_start(
        self,
        serialized: dict[str, Any],
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if not self._enabled:
            return
        with handle_internal_errors("starting a span for a LangChain model call"):
            params = kwargs.get("invocation_params")
            node = self._llm_start(sc.OP_TEXT_COMPLETION, run_id, parent_run_id, metadata, params)
            if node is not None and _content.enabled():
                node.capture(sc.CONTENT_INPUT_MESSAGES, prompts)

    def _llm_start(
        self, operation: str, run_id: UUID, parent_run_id: UUID | None, metadata: Any, params: Any
    ) -> Node | None:
        metadata = metadata if isinstance(metadata, Mapping) else {}
        params = params if isinstance(params, Mapping) else {}
        model = _text(metadata.get("ls_model_name")) or _text(params.get("model")) or _text(params.get("model_name"))
        provider = _text(metadata.get("ls_provider")) or PROVIDER
        attributes: dict[str, Any] = {sc.GEN_AI_OPERATION_NAME: operation, sc.GEN_AI_PROVIDER_NAME: provider}
        if model is not None:
            attributes[sc.GEN_AI_REQUEST_MODEL] = model
        node = self._tree.start(
            run_id,
            parent_run_id,
            kind=sc.KIND_LLM,
            name=operation if model is None else f"{operation} {model}",
            attributes=attributes,
            span_kind=SpanKind.CLIENT,
        )
        if node is None:
            return None
        with self._lock:
            self._runs[run_id] = _Run(node, _LLM)
        tools = _tool_names(params.get("tools"))
        if tools:
            # The tools bound to this call are the agent's declared tools: their names are code.
            self._names.register_valid("tool", tools)
            run = node.nearest(sc.KIND_RUN)
            if run is not None:
                run.extra["tools"] = frozenset(tools)
        return node

    def on_llm_new_token(
        self,
        token: Any,
        *,
        chunk: Any = None,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        if not self._enabled:
            return
        with handle_internal_errors("recording a LangChain stream chunk"):
            # Only the time to the first chunk: the usage the last chunk carries is counted once, at on_llm_end.
            node = self._tree.get(run_id)
            if node is not None and node.llm is not None:
                node.llm.first_chunk()

    def on_llm_end(
        self,
        response: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        if not self._enabled:
            return
        with handle_internal_errors("ending a span for a LangChain model call"):
            record = self._take(run_id)
            if record is None:
                return
            attributes: dict[str, Any] = {}
            with handle_internal_errors("reading a LangChain model answer"):
                attributes = _llm_end_attributes(response)
            if _content.enabled():
                with handle_internal_errors("reading a LangChain model answer"):
                    answers = _answers(response)
                    if answers is not None:
                        record.node.capture(sc.CONTENT_OUTPUT_MESSAGES, answers)
            self._tree.end(run_id, attributes=attributes)

    def on_llm_error(
        self,
        error: BaseException,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        if not self._enabled:
            return
        with handle_internal_errors("ending a span for a LangChain model call"):
            record = self._take(run_id)
            if record is not None:
                self._tree.end(run_id, error_type=error_type_of(error))

    # -- tools ------------------------------------------------------------------------------------------
    @staticmethod
    def _tool_attributes(tool: str | None, call_id: str | None) -> dict[str, Any]:
        attributes: dict[str, Any] = {sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL, sc.GEN_AI_TOOL_TYPE: "function"}
        if tool is not None:
            attributes[sc.GEN_AI_TOOL_NAME] = tool
        if call_id is not None:
            attributes[sc.GEN_AI_TOOL_CALL_ID] = call_id
        return attributes

    def on_tool_start(
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if not self._enabled:
            return
        with handle_internal_errors("starting a span for a LangChain tool"):
            tool = _text(serialized.get("name") if isinstance(serialized, Mapping) else None) or _text(
                kwargs.get("name")
            )
            call_id = _text(kwargs.get("tool_call_id"))
            node = self._tree.start(
                run_id,
                parent_run_id,
                kind=sc.KIND_TOOL,
                name=sc.OP_EXECUTE_TOOL if tool is None else f"{sc.OP_EXECUTE_TOOL} {tool}",
                attributes=self._tool_attributes(tool, call_id),
            )
            if node is None:
                return
            if _content.enabled():
                node.capture(sc.CONTENT_TOOL_ARGUMENTS, inputs if inputs is not None else input_str)
            run = node.nearest(sc.KIND_RUN)
            with self._lock:
                self._runs[run_id] = _Run(node, _TOOL)
                if call_id is not None and run is not None:
                    run.extra.setdefault("calls", set()).add(call_id)

    def on_tool_end(self, output: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        if not self._enabled:
            return
        with handle_internal_errors("ending a span for a LangChain tool"):
            record = self._take(run_id)
            if record is None:
                return
            if _content.enabled():
                record.node.capture(sc.CONTENT_TOOL_RESULT, output)
            # A ToolMessage with status "error": the tool's error went back to the model as its answer.
            failed = getattr(output, "type", None) == "tool" and getattr(output, "status", None) == "error"
            self._tree.end(run_id, error_type=ERROR_TYPE_TOOL_ERROR if failed else None)

    def on_tool_error(
        self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        if not self._enabled:
            return
        with handle_internal_errors("ending a span for a LangChain tool"):
            record = self._take(run_id)
            if record is not None:
                if _content.enabled():
                    record.node.capture(sc.CONTENT_TOOL_RESULT, error)
                # Fatal or fed back to the model: the tool failed either way; the run's outcome tells which.
                self._tree.end(run_id, error_type=error_type_of(error))

    # -- lifecycle --------------------------------------------------------------------------------------
    def close(self) -> int:
        """Stop mapping and end every span still open with ``error.type = agentdiag.uninstrumented`` (iterations
        whose nodes all ended end normally). Returns how many were open."""
        self._enabled = False
        with self._lock:
            runs = [record.node for record in self._runs.values() if record.role == _ROOT]
            finished = [
                node
                for run in runs
                for node in run.extra.get("iterations", {}).values()
                if node.extra["open"] == 0 and not node.ended
            ]
            self._runs.clear()
        for node in finished:
            self._end_iteration(node)
        return self._tree.end_all(sc.ERROR_TYPE_UNINSTRUMENTED)
