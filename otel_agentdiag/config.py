"""``configure()``: build the redacting pipeline and hand back a handle to flush and shut it down.

Pipeline (design.md §2; docs/architecture.md says where the code departs from it)::

    TracerProvider ─┬─ SessionSequencer (on_start: agentdiag.observer.id, agentdiag.sequence)
                    ├─ ContentRecorder (only with capture_content: content onto the ended span, for the store)
                    ├─ AccountingBatchSpanProcessor ─ [worker] RedactingSpanProcessor(local) ─ SQLiteSpanExporter
                    └─ AccountingBatchSpanProcessor ─ [worker] RedactingSpanProcessor(strict) ─ OTLPSpanExporter

The provider hands ended spans to the batch processors; each redacts on its worker thread, just before export,
so the agent's thread only queues the span and no exporter ever receives anything but the redacted copy.

Each branch (a *destination*) has its own policy and may have its own hash key. Each batch processor counts
the fate of every span; the SQLite branch persists those counts with the spans.

Precedence: argument > environment variable > default.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter

from otel_agentdiag import environment_variables as env
from otel_agentdiag._internal import ids as _ids
from otel_agentdiag._internal.errors import handle_internal_errors
from otel_agentdiag._internal.fork import reinit_after_fork
from otel_agentdiag._internal.trust import UntrustedPathError
from otel_agentdiag.instrumentation import manual
from otel_agentdiag.pipeline import AccountingBatchSpanProcessor, SessionSequencer
from otel_agentdiag.pipeline.audit import ForeignProcessor, foreign_processors, warn_about_foreign_processors
from otel_agentdiag.pipeline.batching import DEFAULT_MAX_EXPORT_BATCH, DEFAULT_MAX_QUEUE_SPANS, DEFAULT_SCHEDULE_DELAY_S
from otel_agentdiag.redaction import hash_keys, hashing
from otel_agentdiag.redaction.policy import LOCAL, STRICT, Policy, PolicyError, resolve_policy
from otel_agentdiag.redaction.processor import RedactingSpanProcessor
from otel_agentdiag.storage import RetentionLimits
from otel_agentdiag.storage.store import default_store_path
from otel_agentdiag.storage.trusted import check_store_files

if TYPE_CHECKING:
    from otel_agentdiag.content.recorder import ContentRecorder

_logger = logging.getLogger(__name__)


def is_enabled() -> bool:
    """False when ``AGENTDIAG_ENABLED`` switches otel-agentdiag off."""
    return not env.is_disabled(os.environ.get(env.AGENTDIAG_ENABLED))


@dataclass(frozen=True, kw_only=True)
class AgentDiagOptions:
    """What ``configure()`` resolved from its arguments and the environment."""

    enabled: bool
    service_name: str | None
    store_path: Path | None
    otlp_endpoint: str | None
    """``None`` with ``otlp_from_env`` true: the OTLP exporter reads ``OTEL_EXPORTER_OTLP_*`` itself."""
    otlp_from_env: bool
    otlp_protocol: str | None = None
    """``http/protobuf`` or ``grpc`` when there is an OTLP branch (``None`` when there is none)."""
    otlp_protocol_source: str | None = None
    """Where the protocol came from: ``argument``, ``default``, or the environment variable that named it."""
    capture_content: bool = False
    """Whether content (prompts, outputs, tool arguments and results) is captured into the local store."""


class AgentDiag:
    """The handle ``configure()`` returns: flush, shut down, and where the traces go.

    Usable as a context manager (``with configure(...) as diag:``) that shuts the pipeline down on exit.
    A clean interpreter exit also shuts it down, which flushes every pending span.
    """

    def __init__(
        self,
        options: AgentDiagOptions,
        tracer_provider: TracerProvider | None = None,
        processors: tuple[RedactingSpanProcessor, ...] = (),
        owns_provider: bool = False,
        destinations: tuple[Destination, ...] = (),
        sequencer: SessionSequencer | None = None,
        batch_processors: tuple[AccountingBatchSpanProcessor, ...] = (),
        content: ContentRecorder | None = None,
    ) -> None:
        self.options = options
        self.content = content
        """The content recorder when ``capture_content`` is on (``None`` otherwise)."""
        self.tracer_provider = tracer_provider
        self.processors = processors
        """One redacting processor per destination, in the order of :attr:`destinations`."""
        self.batch_processors = batch_processors
        """The batching processor behind each redacting processor (same order): queue bounds and counts."""
        self.sequencer = sequencer
        """Numbers every span per session (``agentdiag.sequence``); ``None`` when nothing is installed."""
        self.destinations = destinations
        self.key_ids = {d.name: d.hasher.key_id for d in destinations}
        """Destination → id of its hash key (it appears in every digest: ``hmac-sha256:<key id>:...``)."""
        self.key_id = destinations[0].hasher.key_id if destinations else None
        """The key id of the first destination (the local store when there is one)."""
        self._owns_provider = owns_provider
        self._lock = threading.Lock()
        self._is_shutdown = not options.enabled
        if options.enabled:
            atexit.register(self.shutdown)
            _shutdown_when_worker_exits(self, forked=False)
            reinit_after_fork(self._after_fork_in_child)

    def _after_fork_in_child(self) -> None:
        if not self._is_shutdown:
            _shutdown_when_worker_exits(self, forked=True)

    @property
    def enabled(self) -> bool:
        return self.options.enabled

    @property
    def store_path(self) -> Path | None:
        """Absolute path of the SQLite store (``None`` when disabled or when the local branch is off, e.g.
        because the store or its key was refused)."""
        if not self.enabled or not any(d.name == LOCAL_DESTINATION for d in self.destinations):
            return None
        return self.options.store_path

    def drift_report(self, candidates: Iterable[str] = ()) -> dict[str, dict[str, Any]]:
        """Per destination, the attribute keys its policy dropped as unknown and how often, value-free.

        Keys are shown as keyed digests unless the policy's summary is ``debug`` or the key is one of
        ``candidates`` (names you suspect and may want to allow). See ``docs/policy.md``. Covers every span ended
        before the call: redaction runs on the export thread, so this flushes the pipeline first.
        """
        self.force_flush()
        candidates = tuple(candidates)
        return {d.name: p.drift_report(candidates) for d, p in zip(self.destinations, self.processors, strict=True)}

    def foreign_processors(self) -> list[ForeignProcessor]:
        """The span processors on this pipeline's provider that are not otel-agentdiag's, so see every span
        before redaction and export it under none of our policies (by class name; never their configuration).
        ``configure()`` logs a warning for each one present when it runs; this also finds those added later.
        The fix for each: :func:`otel_agentdiag.redacting_processor` around its exporter (docs/policy.md)."""
        return [] if self.tracer_provider is None else foreign_processors(self.tracer_provider)

    @property
    def observer_id(self) -> str | None:
        """``agentdiag.observer.id`` of this pipeline (16 hex digits; ``None`` when nothing is installed)."""
        return None if self.sequencer is None else self.sequencer.observer_id

    def stats(self) -> dict[str, Any]:
        """Per destination, what became of every span so far, JSON-ready (value-free: counts and digests).

        ``{"observer": id, "destinations": {name: {"redaction": {redacted, failed, tombstoned, dropped},
        "pipeline": AccountingBatchSpanProcessor.stats().as_dict()}}}``. Per session (keyed by session digest,
        ``""`` for spans outside any session) ``observed = accepted + rejected + dropped + pending``.
        ``correlation_ids``: the side channel that carries raw ids beside spans to the redactors (process-wide):
        ``spans`` with an entry now, ``evicted`` entries (their spans went out without their ids).
        """
        destinations: dict[str, Any] = {}
        for destination, redacting, batching in zip(
            self.destinations, self.processors, self.batch_processors, strict=False
        ):
            destinations[destination.name] = {
                "redaction": {
                    "redacted": redacting.redacted,
                    "failed": redacting.failed,
                    "tombstoned": redacting.tombstoned,
                    "dropped": redacting.dropped,
                },
                "pipeline": batching.stats().as_dict(),
            }
        found: dict[str, Any] = {
            "observer": self.observer_id,
            "destinations": destinations,
            "correlation_ids": _ids.TABLE.stats(),
        }
        if self.content is not None:
            found["content"] = self.content.stats()
        return found

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Export everything pending now; True when every branch finished within the timeout."""
        if self._is_shutdown:
            return True  # nothing pending
        ok = True
        for processor in self.processors:
            ok = processor.force_flush(timeout_millis) and ok
        return ok

    def shutdown(self, timeout_s: float | None = None) -> None:
        """Flush and stop the pipeline (idempotent). The wrappers fall back to the global provider.

        Bounded in time: all destinations flush in parallel within ``timeout_s`` (default 5 s), even if an
        exporter hangs; spans not exported by then are counted as dropped (``shutdown``).
        """
        with self._lock:
            if self._is_shutdown:
                return
            self._is_shutdown = True
        atexit.unregister(self.shutdown)
        if self.content is not None:
            self.content.uninstall()  # nothing more is captured; what was captured still goes out below
        with handle_internal_errors("shutting down"):
            self._shutdown_batching(timeout_s)
        with handle_internal_errors("shutting down"):
            if self._owns_provider and self.tracer_provider is not None:
                self.tracer_provider.shutdown()
            else:
                for processor in self.processors:
                    processor.shutdown()
        if manual._tracer_provider_in_use() is self.tracer_provider:
            manual.use_tracer_provider(None)

    def _shutdown_batching(self, timeout_s: float | None) -> None:
        """Stop every batch processor against one deadline (each drains while the others do)."""
        if not self.batch_processors:
            return
        timeout = max(p.shutdown_timeout_s for p in self.batch_processors) if timeout_s is None else max(timeout_s, 0.0)
        deadline = time.monotonic() + timeout
        for processor in self.batch_processors:
            processor.begin_shutdown()
        for processor in self.batch_processors:
            processor.shutdown(max(deadline - time.monotonic(), 0.0))

    def __enter__(self) -> AgentDiag:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        return f"AgentDiag(enabled={self.enabled}, store={str(self.store_path) if self.store_path else None!r})"


def _shutdown_when_worker_exits(diag: AgentDiag, *, forked: bool) -> None:
    """Make a ``multiprocessing`` worker's clean exit flush, as the interpreter's exit does.

    multiprocessing ends fork and forkserver workers with ``os._exit()``: its own finalizers run, ``atexit``
    does not. So the handle's shutdown joins those finalizers: in a worker forked from a configured process
    (registered right after the fork, once multiprocessing has cleared the finalizers it inherited), and in a
    worker that calls ``configure()`` itself. Without multiprocessing loaded, nothing is done.
    """
    util = sys.modules.get("multiprocessing.util")
    if util is None:
        return
    if forked:
        util.register_after_fork(diag, _finalize_in_worker)
        return
    process = sys.modules.get("multiprocessing.process")
    if process is not None and process.parent_process() is not None:
        _finalize_in_worker(diag)


def _finalize_in_worker(diag: AgentDiag) -> None:
    util = sys.modules["multiprocessing.util"]
    util.Finalize(None, diag.shutdown, exitpriority=10)


def _resolve(
    service_name: str | None,
    store: str | os.PathLike[str] | Literal[False] | None,
    otlp_endpoint: str | None,
    otlp_protocol: str | None = None,
    capture_content: bool | None = None,
) -> AgentDiagOptions:
    from otel_agentdiag.exporters import otlp

    if capture_content is not None and not isinstance(capture_content, bool):
        raise ValueError("capture_content must be True or False")

    enabled = is_enabled()
    if store is False:
        store_path = None
    elif store is None:
        store_path = default_store_path().absolute()
    else:
        store_path = Path(store).absolute()
    # An argument is checked even when there is no OTLP branch: it is a programming error either way.
    otlp.check_protocol(otlp_protocol)
    endpoint_env = os.environ.get(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or os.environ.get(
        env.OTEL_EXPORTER_OTLP_ENDPOINT
    )
    otlp_from_env = otlp_endpoint is None and bool(endpoint_env)
    protocol: str | None = None
    protocol_source: str | None = None
    if otlp_endpoint is not None or otlp_from_env:
        # Only an OTLP branch reads the protocol variables (and warns about an unusable one).
        protocol, protocol_source = otlp.resolve_protocol(otlp_protocol)
    return AgentDiagOptions(
        enabled=enabled,
        service_name=service_name,
        store_path=store_path,
        otlp_endpoint=otlp_endpoint,
        otlp_from_env=otlp_from_env,
        otlp_protocol=protocol,
        otlp_protocol_source=protocol_source,
        capture_content=_capture_content(capture_content, store_path, enabled),
    )


def _capture_content(argument: bool | None, store_path: Path | None, enabled: bool) -> bool:
    """Argument > ``AGENTDIAG_CAPTURE_CONTENT`` (only ``true`` is on) > off. Content needs the local store."""
    wanted = env.parse_capture_content(os.environ.get(env.AGENTDIAG_CAPTURE_CONTENT)) if argument is None else argument
    if wanted and enabled and store_path is None:
        _logger.warning("otel-agentdiag: content capture needs the local store (store=False); it stays off")
        return False
    return wanted and enabled


LOCAL_DESTINATION = "local"
OTLP_DESTINATION = "otlp"


@dataclass(frozen=True)
class Destination:
    """One branch of the pipeline as resolved: where spans go, under which policy and which key."""

    name: str
    """``local`` (the SQLite store) or ``otlp``."""
    policy: Policy
    policy_source: str
    """Where the policy came from: ``default``, ``argument``, or the environment variable that named it."""
    hasher: hashing.IdHasher
    key_source: str
    """Where the key came from (never the key): ``argument``, an environment variable, ``key file <path>``,
    or ``ephemeral`` (this process only)."""


def _hash_key(
    hash_key: str | bytes | None, store_path: Path | None, *, create_key_file: bool = True
) -> tuple[bytes, str]:
    """The local key and where it came from (:func:`otel_agentdiag.redaction.hash_keys.resolve_key`): raises for a
    refused key, never replaces one."""
    return hash_keys.resolve_key(hash_key, store_path, create_key_file=create_key_file)


def _policy(
    destination: str, argument: Policy | str | os.PathLike[str] | None, variable: str, default: Policy
) -> tuple[Policy, str]:
    """Argument (errors raise) > environment (errors log and fall back to strict) > default."""
    if argument is not None:
        policy, source = resolve_policy(argument), "argument"
    else:
        value = os.environ.get(variable)
        if not value:
            policy, source = default, "default"
        else:
            try:
                policy, source = resolve_policy(value), variable
                _check_destination(destination, policy)
            except PolicyError as exc:
                _logger.error("otel-agentdiag: %s is unusable (%s); using the strict policy", variable, exc)
                return STRICT, f"{variable} (unusable; strict used)"
    _check_destination(destination, policy)
    return policy, source


class BatchSettings(TypedDict):
    max_queue_spans: int
    max_export_batch: int
    schedule_delay_s: float


def batch_settings_from_env() -> BatchSettings:
    """The batch settings ``configure()`` gives each destination, from the SDK's standard variables
    (``OTEL_BSP_MAX_QUEUE_SIZE``, ``OTEL_BSP_MAX_EXPORT_BATCH_SIZE``, ``OTEL_BSP_SCHEDULE_DELAY`` in ms) over
    otel-agentdiag's defaults. A malformed value is ignored with a warning; a batch larger than the queue is
    lowered to the queue's size (the SDK raises there; a setting from the environment must not stop the agent).
    ``OTEL_BSP_EXPORT_TIMEOUT`` is not used: each exporter bounds its own export (the OTLP exporter's
    ``OTEL_EXPORTER_OTLP_TIMEOUT``, the store's busy timeout) and ``shutdown()`` has its own deadline."""

    def positive_int(variable: str, default: int) -> int:
        return env.parse_positive_int(variable, os.environ.get(variable), default=default)

    queue = positive_int(env.OTEL_BSP_MAX_QUEUE_SIZE, DEFAULT_MAX_QUEUE_SPANS)
    batch = positive_int(env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE, min(DEFAULT_MAX_EXPORT_BATCH, queue))
    if batch > queue:  # only a value the user set can be
        _logger.warning(
            "otel-agentdiag: %s is larger than the queue (%d spans); using %d",
            env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE,
            queue,
            queue,
        )
        batch = queue
    delay_ms = positive_int(env.OTEL_BSP_SCHEDULE_DELAY, round(DEFAULT_SCHEDULE_DELAY_S * 1000))
    return BatchSettings(max_queue_spans=queue, max_export_batch=batch, schedule_delay_s=delay_ms / 1000)


def _check_destination(destination: str, policy: Policy) -> None:
    if destination != LOCAL_DESTINATION and policy.summary == "debug":
        raise PolicyError(f"summary='debug' lists removed key names and is for the local store only, not {destination}")


def _hasher(key: bytes, policy: Policy, cache: dict[tuple[bytes, str], hashing.IdHasher]) -> hashing.IdHasher:
    hasher = cache.get((key, policy.hash_function))
    if hasher is None:
        if policy.hash_function != hashing.ALGORITHM:
            _logger.warning(
                "otel-agentdiag: policy %r uses unkeyed %s digests: guessable IDs (e-mail addresses, numbers) "
                "can be recovered by hashing candidates",
                policy.name,
                policy.hash_function,
            )
        hasher = cache[(key, policy.hash_function)] = hashing.IdHasher(key, algorithm=policy.hash_function)
    return hasher


def resolve_destinations(
    options: AgentDiagOptions,
    *,
    hash_key: str | bytes | None = None,
    otlp_hash_key: str | bytes | None = None,
    local_policy: Policy | str | os.PathLike[str] | None = None,
    otlp_policy: Policy | str | os.PathLike[str] | None = None,
    create_key_file: bool = True,
    refusals: list[hash_keys.Refusal] | None = None,
) -> tuple[Destination, ...]:
    """The destinations ``configure()`` builds for ``options``: policy and key per branch.

    ``create_key_file=False`` (used by ``agentdiag doctor``) never writes a key file: a missing one is
    replaced by a key for this process only, and the source says so.

    Fail closed: a store that is not ours (:mod:`otel_agentdiag.storage.trusted`) turns the local destination
    off; a key that is refused (weak, from ``AGENTDIAG_HASH_KEY``/``AGENTDIAG_OTLP_HASH_KEY``, or a key file that
    is weak or not ours) turns off every destination that would have used it. A refused key is never replaced
    by another. Each refusal is appended to ``refusals`` (one per cause) when it is given; otherwise the first
    one is raised (:class:`~otel_agentdiag._internal.trust.UntrustedPathError` or
    :class:`~otel_agentdiag.redaction.WeakKeyError`, both ``ValueError``). A weak or mistyped key *argument*
    always raises ``ValueError``.
    """
    wants_otlp = options.otlp_endpoint is not None or options.otlp_from_env
    if options.store_path is None and not wants_otlp:
        return ()
    found: dict[str, set[str]] = {}
    first: list[Exception] = []

    def refuse(exc: Exception, destinations: set[str]) -> None:
        first.append(exc)
        found.setdefault(str(exc), set()).update(destinations)

    # Arguments first: a bad one raises before anything else is looked at.
    local_argument = hash_keys.argument_key(hash_key, "hash_key")
    otlp_argument = hash_keys.argument_key(otlp_hash_key, "otlp_hash_key")
    local_wanted = options.store_path is not None
    if local_wanted:
        assert options.store_path is not None
        try:
            check_store_files(options.store_path)
        except UntrustedPathError as exc:
            refuse(exc, {LOCAL_DESTINATION})
            local_wanted = False
    otlp_key: tuple[bytes, str] | None = None
    otlp_refused = False
    if wants_otlp:
        if otlp_argument is not None:
            otlp_key = (otlp_argument, "argument")
        else:
            try:
                from_env = hash_keys.environment_key(env.AGENTDIAG_OTLP_HASH_KEY)
            except hash_keys.REFUSED as exc:
                refuse(exc, {OTLP_DESTINATION})
                otlp_refused = True
            else:
                otlp_key = None if from_env is None else (from_env, env.AGENTDIAG_OTLP_HASH_KEY)
    users = ({LOCAL_DESTINATION} if options.store_path is not None else set()) | (
        {OTLP_DESTINATION} if wants_otlp and otlp_key is None and not otlp_refused else set()
    )
    key: tuple[bytes, str] | None = None
    if local_wanted or OTLP_DESTINATION in users:
        try:
            key = (local_argument, "argument") if local_argument is not None else None
            key = key or hash_keys.resolve_key(None, options.store_path, create_key_file=create_key_file)
        except hash_keys.REFUSED as exc:
            refuse(exc, users)
    if first and refusals is None:
        raise first[0]
    if refusals is not None:
        refusals.extend(hash_keys.Refusal(reason, tuple(sorted(names))) for reason, names in found.items())
    cache: dict[tuple[bytes, str], hashing.IdHasher] = {}
    destinations = []
    if local_wanted and key is not None:
        policy, source = _policy(LOCAL_DESTINATION, local_policy, env.AGENTDIAG_LOCAL_POLICY, LOCAL)
        destinations.append(Destination(LOCAL_DESTINATION, policy, source, _hasher(key[0], policy, cache), key[1]))
    if wants_otlp and not otlp_refused and (otlp_key or key) is not None:
        policy, source = _policy(OTLP_DESTINATION, otlp_policy, env.AGENTDIAG_OTLP_POLICY, STRICT)
        chosen = otlp_key or key
        assert chosen is not None
        destinations.append(Destination(OTLP_DESTINATION, policy, source, _hasher(chosen[0], policy, cache), chosen[1]))
    return tuple(destinations)


def configure(
    *,
    service_name: str | None = None,
    store: str | os.PathLike[str] | Literal[False] | None = None,
    otlp_endpoint: str | None = None,
    otlp_protocol: str | None = None,
    hash_key: str | bytes | None = None,
    tracer_provider: TracerProvider | None = None,
    set_global: bool | None = None,
    local_policy: Policy | str | os.PathLike[str] | None = None,
    otlp_policy: Policy | str | os.PathLike[str] | None = None,
    otlp_hash_key: str | bytes | None = None,
    retention: RetentionLimits | None = None,
    capture_content: bool | None = None,
) -> AgentDiag:
    """Install the redacting pipeline and return its handle.

    :param service_name: ``service.name`` of the resource (default: ``OTEL_SERVICE_NAME``, then the SDK's).
    :param store: path of the SQLite store (default: ``AGENTDIAG_STORE``, then ``./.agentdiag/traces.db``);
        ``False`` turns the local branch off.
    :param otlp_endpoint: where the OTLP branch sends spans. For http/protobuf a base URL (``/v1/traces`` is
        appended unless present), e.g. ``http://127.0.0.1:4318``; for gRPC ``http://host:port`` (plaintext),
        ``https://host:port`` or ``host:port`` (TLS unless ``OTEL_EXPORTER_OTLP_INSECURE=true``), e.g.
        ``http://127.0.0.1:4317``. Without it, the OTLP branch is added when ``OTEL_EXPORTER_OTLP_ENDPOINT``
        or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set, and the SDK exporter reads the endpoint itself (the
        generic variable gets ``/v1/traces`` appended for http/protobuf; the traces one is used as it is).
        Headers, TLS files, compression and timeout always come from the standard ``OTEL_EXPORTER_OTLP_*``
        variables. Needs the ``otlp`` extra.
    :param otlp_protocol: ``"http/protobuf"`` (default) or ``"grpc"`` (default:
        ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL``, then ``OTEL_EXPORTER_OTLP_PROTOCOL``). Any other argument,
        ``"http/json"`` included (the Python SDK has no such exporter), raises ``ValueError``; such a
        variable logs a warning and selects http/protobuf.
    :param hash_key: key for the HMAC-SHA256 digests of correlation IDs (default: ``AGENTDIAG_HASH_KEY``,
        then a 32-byte key file ``hash.key`` created mode 0600 beside the store). At least 32 random bytes:
        ``bytes``, or text of 64+ hex digits or base64 (``secrets.token_hex(32)``); a chosen key is refused.
    :param tracer_provider: add the pipeline to this SDK provider instead of building one (its resource
        is kept; ``service_name`` is then ignored).
    :param set_global: make the provider the global one: ``True`` always, ``False`` never, ``None`` (default)
        only when no global provider has been set yet. The manual wrappers use this provider either way.
    :param local_policy: redaction policy of the SQLite store: a :class:`~otel_agentdiag.redaction.Policy`,
        ``"local"`` (default, or ``AGENTDIAG_LOCAL_POLICY``), ``"strict"``, or a TOML policy file.
    :param otlp_policy: redaction policy of the OTLP export: ``"strict"`` (default, or
        ``AGENTDIAG_OTLP_POLICY``), ``"local"``, a policy or a file. ``summary="debug"`` is refused here.
    :param otlp_hash_key: a separate key for the OTLP digests (default: ``AGENTDIAG_OTLP_HASH_KEY``, then
        the local key), so the export cannot be joined with the local store.
    :param retention: how much the SQLite store keeps, a :class:`~otel_agentdiag.storage.RetentionLimits`
        (default: ``RetentionLimits()``: per session 10 000 spans, 64 MiB, 30 days; 1 GiB per store; 256 KiB
        per span). Limits are applied on each write: the oldest rows of the first scope over a limit go.
    :param capture_content: capture prompts and messages, system instructions, model outputs, tool
        definitions, tool arguments and tool results into the local store (default: ``AGENTDIAG_CAPTURE_CONTENT``,
        where only ``true`` is on; else off). Captured content is never an attribute of any span: it goes to the
        store's ``span_content`` table only, never to OTLP, ``push``, ``export`` or a support bundle. It is as
        sensitive as the data itself. Even then environment variables, headers, cookies, credentials, URL
        query strings and user-info, and base64 media over 16 KiB are left out (markers say what was cut).
        Needs the local store: with ``store=False`` it stays off (a warning says so).

    A bad argument raises ``ValueError`` (a :class:`~otel_agentdiag.redaction.PolicyError` for policies)
    before anything is installed; so does a weak ``hash_key``/``otlp_hash_key`` (a
    :class:`~otel_agentdiag.redaction.WeakKeyError`: 32+ random bytes, as bytes, 64+ hex digits or base64). A bad
    ``AGENTDIAG_*_POLICY`` variable logs an error and selects the strict policy. What the machine holds never
    raises, it fails closed with one logged error each: a store folder, database, ``-wal``/``-shm`` or key file
    that is not the effective user's, is writable by group or others, or is a symbolic link, turns off the
    local store (and whatever used that key file); a weak ``AGENTDIAG_HASH_KEY``/``AGENTDIAG_OTLP_HASH_KEY`` or
    key file turns off every destination that would have used the key (a refused key is never replaced by
    another). With ``AGENTDIAG_ENABLED=false`` nothing is installed and no file is created; the handle is inert.
    """
    options = _resolve(service_name, store, otlp_endpoint, otlp_protocol, capture_content)
    if not options.enabled:
        return AgentDiag(options)
    if tracer_provider is not None and not hasattr(tracer_provider, "add_span_processor"):
        raise ValueError("tracer_provider must be an opentelemetry-sdk TracerProvider")
    if retention is not None and not isinstance(retention, RetentionLimits):
        raise ValueError("retention must be a RetentionLimits")
    refusals: list[hash_keys.Refusal] = []
    destinations = resolve_destinations(
        options,
        hash_key=hash_key,
        otlp_hash_key=otlp_hash_key,
        local_policy=local_policy,
        otlp_policy=otlp_policy,
        refusals=refusals,
    )
    for refusal in refusals:
        # Fail closed and say why, once per cause: never raise into the agent for what the machine holds.
        _logger.error("otel-agentdiag: %s", refusal.describe())

    owns_provider = tracer_provider is None
    if tracer_provider is not None and service_name is not None:
        _logger.warning("otel-agentdiag: service_name is ignored when tracer_provider is given (its resource wins)")
    if tracer_provider is None:
        attributes = {SERVICE_NAME: service_name} if service_name else {}
        tracer_provider = TracerProvider(resource=Resource.create(attributes), shutdown_on_exit=False)

    sequencer = SessionSequencer()
    content: ContentRecorder | None = None
    if options.capture_content:
        from otel_agentdiag.content.recorder import ContentRecorder

        content = ContentRecorder()
    processors: list[RedactingSpanProcessor] = []
    batch_processors: list[AccountingBatchSpanProcessor] = []
    installed: list[Destination] = []
    # Every exporter before any thread or processor: the OTLP one first, since a missing extra raises.
    exporters: dict[str, SpanExporter | None] = {}
    try:
        for destination in sorted(destinations, key=lambda d: d.name != OTLP_DESTINATION):
            exporters[destination.name] = _exporter(destination.name, options, retention)
    except BaseException:
        for built in exporters.values():
            if built is not None:
                built.shutdown()
        raise
    batch = batch_settings_from_env()
    for destination in destinations:
        exporter = exporters[destination.name]
        if exporter is None:
            continue
        local = destination.name == LOCAL_DESTINATION
        if local and content is not None:
            exporter.content = content  # type: ignore[attr-defined]
        batching = AccountingBatchSpanProcessor(
            exporter,
            observer=sequencer,
            # The OTLP exporter retries transient failures itself, within OTEL_EXPORTER_OTLP_TIMEOUT.
            max_retries=0 if destination.name == OTLP_DESTINATION else 3,
            **batch,
        )
        batch_processors.append(batching)
        processors.append(
            # The sequencer, first on the provider, already copies the run's conversation id onto each span.
            # Redaction runs on the batch worker, just before export: the agent's thread only queues the span.
            RedactingSpanProcessor(
                batching,
                policy=destination.policy,
                hasher=destination.hasher,
                propagate_conversation=False,
                redact_in_worker=True,
                content=content if local else None,
            )
        )
        installed.append(destination)

    if processors:
        # First: the numbers must be on the span before any destination sees it.
        tracer_provider.add_span_processor(sequencer)
    if content is not None and processors:
        # Before the batch processors: content moves onto each ended span before any branch queues it.
        tracer_provider.add_span_processor(content)
        content.install()
        _logger.info("otel-agentdiag: content capture is on; content is kept in %s only", options.store_path)
    for batching in batch_processors:
        # Redaction runs in the batch worker, so the provider hands ended spans straight to the batch processor
        # (one call fewer per span than through the redacting processor, whose on_end would only forward them).
        tracer_provider.add_span_processor(batching)
    if not owns_provider and processors:
        warn_about_foreign_processors(tracer_provider)  # the user's own processors see spans before redaction
    _maybe_set_global(tracer_provider, set_global)
    manual.use_tracer_provider(tracer_provider)
    return AgentDiag(
        options,
        tracer_provider=tracer_provider,
        processors=tuple(processors),
        owns_provider=owns_provider,
        destinations=tuple(installed),
        sequencer=sequencer if processors else None,
        batch_processors=tuple(batch_processors),
        content=content if processors else None,
    )


def _exporter(destination: str, options: AgentDiagOptions, retention: RetentionLimits | None) -> SpanExporter | None:
    if destination == LOCAL_DESTINATION:
        from otel_agentdiag.exporters.sqlite import SQLiteSpanExporter
        from otel_agentdiag.storage import SpanStore, StoreError

        assert options.store_path is not None
        try:
            # Opened now, so a bad store is reported at once; the exporter closes it on shutdown.
            return SQLiteSpanExporter(SpanStore(options.store_path, retention=retention), owns_store=True)
        except UntrustedPathError as exc:
            # Not ours (changed since resolve_destinations looked): fail closed, the local branch is off.
            _logger.error("otel-agentdiag: %s; the local store is off", exc)
            return None
        except (StoreError, OSError) as exc:
            # Never hurt the agent: keep the pipeline; the exporter retries opening on each batch and counts
            # what it cannot write.
            _logger.error("otel-agentdiag: cannot open the trace store %s: %s", options.store_path, exc)
            return SQLiteSpanExporter(options.store_path, retention=retention)
    from otel_agentdiag.exporters.otlp import DEFAULT_PROTOCOL, otlp_span_exporter

    try:
        return otlp_span_exporter(options.otlp_endpoint, options.otlp_protocol or DEFAULT_PROTOCOL)
    except ImportError:
        if options.otlp_endpoint is not None:
            raise
        _logger.warning("otel-agentdiag: OTEL_EXPORTER_OTLP_ENDPOINT is set but the 'otlp' extra is missing")
        return None


def _maybe_set_global(provider: TracerProvider, set_global: bool | None) -> None:
    current = trace.get_tracer_provider()
    if current is provider or set_global is False:
        return
    no_global = isinstance(current, trace.ProxyTracerProvider)
    if set_global or no_global:
        if not no_global:
            _logger.warning("otel-agentdiag: a global TracerProvider is already set and cannot be replaced")
            return
        trace.set_tracer_provider(provider)
