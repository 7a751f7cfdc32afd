"""The skeletons the instrumentors of this package share: ``Instrumentor``, and the client one over it.

A client instrumentor names its library (``_library``), its supported versions (``_instruments``) and the
methods it wraps (``_targets``); :class:`ClientInstrumentor` does the rest: wrapping with ``wrapt``, exact
reversal, the shared HTTP-attempt hook, and never failing ``opentelemetry-instrument`` on an SDK layout it does
not know.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Any

from opentelemetry import trace
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]
from wrapt import wrap_function_wrapper

from otel_agentdiag.instrumentation import _attempts
from otel_agentdiag.instrumentation._provider import tracer_for
from otel_agentdiag.instrumentation._unwrap import unwrap_ours
from otel_agentdiag.instrumentation._wrappers import Wrapper

_logger = logging.getLogger(__name__)

Target = tuple[type, str, Wrapper]
"""(class, method name, wrapt wrapper)."""


class Instrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Base of every instrumentor of this package: its supported versions are ``_instruments`` (``package.py``).

    BaseInstrumentor is a singleton whose ``__init__`` runs on every instantiation: a subclass's state is set in
    ``_instrument`` (over class-level defaults), never in ``__init__``.
    """

    _instruments: Collection[str] = ()

    def instrumentation_dependencies(self) -> Collection[str]:
        return self._instruments


class ClientInstrumentor(Instrumentor):
    """Base of :class:`~otel_agentdiag.instrumentation.openai.OpenAIInstrumentor` and
    :class:`~otel_agentdiag.instrumentation.anthropic.AnthropicInstrumentor`."""

    _library = ""
    """The SDK's import name, for log lines."""

    _records_attempts = True
    """Whether the shared HTTP-attempt hook is held while instrumented (model-call SDKs; not MCP)."""

    _wrapped: list[Target]
    _holds_attempts: bool

    def _targets(self, tracer: trace.Tracer) -> list[Target]:
        """The methods to wrap; imports the SDK (an ``ImportError`` means: not installed)."""
        raise NotImplementedError

    def _instrument(self, **kwargs: Any) -> None:
        self._wrapped = []
        self._holds_attempts = False
        tracer = tracer_for(type(self).__module__, kwargs.get("tracer_provider"))
        # opentelemetry-instrument stops loading every later instrumentor when one raises anything but an
        # ImportError: an SDK layout this code does not know is logged and left untraced, never fatal.
        try:
            for target, method, wrapper in self._targets(tracer):
                wrap_function_wrapper(target, method, wrapper)
                self._wrapped.append((target, method, wrapper))
        except ImportError:
            self._unwrap_all()
            raise
        except Exception as exc:  # noqa: BLE001
            self._unwrap_all()
            _logger.warning(
                "otel-agentdiag: cannot instrument %s (%s); it stays untraced", self._library, type(exc).__name__
            )
            return
        if self._records_attempts:
            _attempts.acquire()
            self._holds_attempts = True

    def _uninstrument(self, **kwargs: Any) -> None:
        self._unwrap_all()
        if getattr(self, "_holds_attempts", False):
            self._holds_attempts = False
            _attempts.release()

    def _unwrap_all(self) -> None:
        wrapped = getattr(self, "_wrapped", [])
        while wrapped:
            target, method, wrapper = wrapped.pop()
            unwrap_ours(target, method, wrapper)
