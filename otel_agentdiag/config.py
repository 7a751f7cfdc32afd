"""``configure()``: build the redacting pipeline and hand back a handle to flush and shut it down.

Pipeline (design.md §2)::

    TracerProvider ─┬─ RedactingSpanProcessor(strict) ─ BatchSpanProcessor ─ SQLiteSpanExporter ─ store
                    └─ RedactingSpanProcessor(strict) ─ BatchSpanProcessor ─ OTLPSpanExporter ─ collector

Precedence: argument > environment variable > default.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from otel_agentdiag import environment_variables as env
from otel_agentdiag._internal.errors import handle_internal_errors
from otel_agentdiag.instrumentation import manual
from otel_agentdiag.redaction import hashing
from otel_agentdiag.redaction.policy import STRICT
from otel_agentdiag.redaction.processor import RedactingSpanProcessor
from otel_agentdiag.storage.store import default_store_path

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
        key_id: str | None = None,
    ) -> None:
        self.options = options
        self.tracer_provider = tracer_provider
        self.processors = processors
        self.key_id = key_id
        """The id of the hash key in use (it appears in every digest: ``hmac-sha256:<key id>:...``)."""
        self._owns_provider = owns_provider
        self._lock = threading.Lock()
        self._is_shutdown = not options.enabled
        if options.enabled:
            atexit.register(self.shutdown)

    @property
    def enabled(self) -> bool:
        return self.options.enabled

    @property
    def store_path(self) -> Path | None:
        """Absolute path of the SQLite store (``None`` when disabled or when the local branch is off)."""
        return self.options.store_path if self.enabled else None

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Export everything pending now; True when every branch finished within the timeout."""
        if self._is_shutdown:
            return True  # nothing pending
        ok = True
        for processor in self.processors:
            ok = processor.force_flush(timeout_millis) and ok
        return ok

    def shutdown(self) -> None:
        """Flush and stop the pipeline (idempotent). The wrappers fall back to the global provider."""
        with self._lock:
            if self._is_shutdown:
                return
            self._is_shutdown = True
        atexit.unregister(self.shutdown)
        with handle_internal_errors("shutting down"):
            if self._owns_provider and self.tracer_provider is not None:
                self.tracer_provider.shutdown()
            else:
                for processor in self.processors:
                    processor.shutdown()
        if manual._tracer_provider_in_use() is self.tracer_provider:
            manual.use_tracer_provider(None)

    def __enter__(self) -> AgentDiag:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        return f"AgentDiag(enabled={self.enabled}, store={str(self.store_path) if self.store_path else None!r})"


def _resolve(
    service_name: str | None, store: str | os.PathLike[str] | Literal[False] | None, otlp_endpoint: str | None
) -> AgentDiagOptions:
    enabled = is_enabled()
    if store is False:
        store_path = None
    elif store is None:
        store_path = default_store_path().absolute()
    else:
        store_path = Path(store).absolute()
    endpoint_env = os.environ.get(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or os.environ.get(
        env.OTEL_EXPORTER_OTLP_ENDPOINT
    )
    return AgentDiagOptions(
        enabled=enabled,
        service_name=service_name,
        store_path=store_path,
        otlp_endpoint=otlp_endpoint,
        otlp_from_env=otlp_endpoint is None and bool(endpoint_env),
    )


def _hash_key(hash_key: str | bytes | None, store_path: Path | None) -> bytes:
    if isinstance(hash_key, bytes):
        if len(hash_key) < hashing.MIN_KEY_BYTES:
            raise ValueError(f"hash_key must be at least {hashing.MIN_KEY_BYTES} bytes")
        return hash_key
    if isinstance(hash_key, str):
        return hashing.key_from_text(hash_key)
    if hash_key is not None:
        raise ValueError("hash_key must be str or bytes")
    from_env = os.environ.get(env.AGENTDIAG_HASH_KEY)
    if from_env:
        return hashing.key_from_text(from_env)
    key_path = (store_path or default_store_path()).parent / hashing.KEY_FILE_NAME
    try:
        return hashing.load_or_create_key_file(key_path)
    except (OSError, ValueError) as exc:
        _logger.warning(
            "otel-agentdiag: cannot use the hash key file %s (%s); using a key for this process only, so "
            "digests will differ between runs",
            key_path,
            exc,
        )
        return hashing.ephemeral_key()


def configure(
    *,
    service_name: str | None = None,
    store: str | os.PathLike[str] | Literal[False] | None = None,
    otlp_endpoint: str | None = None,
    hash_key: str | bytes | None = None,
    tracer_provider: TracerProvider | None = None,
    set_global: bool | None = None,
) -> AgentDiag:
    """Install the redacting pipeline and return its handle.

    :param service_name: ``service.name`` of the resource (default: ``OTEL_SERVICE_NAME``, then the SDK's).
    :param store: path of the SQLite store (default: ``AGENTDIAG_STORE``, then ``./.agentdiag/traces.db``);
        ``False`` turns the local branch off.
    :param otlp_endpoint: base URL of an OTLP/HTTP receiver (``/v1/traces`` is appended), e.g.
        ``http://127.0.0.1:4318``. Without it, the OTLP branch is added when ``OTEL_EXPORTER_OTLP_ENDPOINT``
        or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set. Needs the ``otlp`` extra.
    :param hash_key: key for the HMAC-SHA256 digests of correlation IDs (default: ``AGENTDIAG_HASH_KEY``,
        then a 32-byte key file ``hash.key`` created mode 0600 beside the store).
    :param tracer_provider: add the pipeline to this SDK provider instead of building one (its resource
        is kept; ``service_name`` is then ignored).
    :param set_global: make the provider the global one: ``True`` always, ``False`` never, ``None`` (default)
        only when no global provider has been set yet. The manual wrappers use this provider either way.

    With ``AGENTDIAG_ENABLED=false`` nothing is installed and no file is created; the handle is inert.
    """
    options = _resolve(service_name, store, otlp_endpoint)
    if not options.enabled:
        return AgentDiag(options)
    if tracer_provider is not None and not hasattr(tracer_provider, "add_span_processor"):
        raise ValueError("tracer_provider must be an opentelemetry-sdk TracerProvider")

    owns_provider = tracer_provider is None
    if tracer_provider is not None and service_name is not None:
        _logger.warning("otel-agentdiag: service_name is ignored when tracer_provider is given (its resource wins)")
    if tracer_provider is None:
        attributes = {SERVICE_NAME: service_name} if service_name else {}
        tracer_provider = TracerProvider(resource=Resource.create(attributes), shutdown_on_exit=False)

    hasher = hashing.IdHasher(_hash_key(hash_key, options.store_path))
    processors: list[RedactingSpanProcessor] = []
    if options.store_path is not None:
        from otel_agentdiag.exporters.sqlite import SQLiteSpanExporter
        from otel_agentdiag.storage import SpanStore, StoreError

        try:
            # Opened now, so a bad store is reported at once; the exporter closes it on shutdown.
            exporter = SQLiteSpanExporter(SpanStore(options.store_path), owns_store=True)
        except (StoreError, OSError) as exc:
            # Never hurt the agent: keep the pipeline; the exporter retries opening on each batch and counts
            # what it cannot write.
            _logger.error("otel-agentdiag: cannot open the trace store %s: %s", options.store_path, exc)
            exporter = SQLiteSpanExporter(options.store_path)
        processors.append(RedactingSpanProcessor(BatchSpanProcessor(exporter), policy=STRICT, hasher=hasher))
    if options.otlp_endpoint is not None or options.otlp_from_env:
        from otel_agentdiag.exporters.otlp import otlp_span_exporter

        try:
            otlp = otlp_span_exporter(options.otlp_endpoint)
        except ImportError:
            if options.otlp_endpoint is not None:
                raise
            _logger.warning("otel-agentdiag: OTEL_EXPORTER_OTLP_ENDPOINT is set but the 'otlp' extra is missing")
        else:
            processors.append(RedactingSpanProcessor(BatchSpanProcessor(otlp), policy=STRICT, hasher=hasher))

    for processor in processors:
        tracer_provider.add_span_processor(processor)
    _maybe_set_global(tracer_provider, set_global)
    manual.use_tracer_provider(tracer_provider)
    return AgentDiag(
        options,
        tracer_provider=tracer_provider,
        processors=tuple(processors),
        owns_provider=owns_provider,
        key_id=hasher.key_id,
    )


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
