"""Zero-code set-up: ``opentelemetry-instrument python app.py`` builds the redacting pipeline from the environment.

Two entry points (``pyproject.toml``) plug into ``opentelemetry-instrument``:

* ``opentelemetry_distro`` ``agentdiag`` → :class:`AgentDiagDistro`: only sets environment *defaults*.
* ``opentelemetry_configurator`` ``agentdiag`` → :class:`AgentDiagConfigurator`: calls
  :func:`otel_agentdiag.configure` with no arguments, so everything comes from ``OTEL_*`` and ``AGENTDIAG_*``
  variables, and makes its provider the global one; the ``opentelemetry_instrumentor`` entry points
  (``agentdiag_openai``, ``agentdiag_anthropic``, and any other installed instrumentor) then trace into it.

How ``opentelemetry-instrument`` chooses (``opentelemetry.instrumentation.auto_instrumentation._load``), in order:

1. **One distro**: the ``opentelemetry_distro`` entry point named by ``OTEL_PYTHON_DISTRO``, else the *first one
   found*, which depends on the order in which installed distributions are discovered (not a documented order).
   Only that distro's ``configure()`` runs.
2. **One configurator**: the ``opentelemetry_configurator`` entry point named by ``OTEL_PYTHON_CONFIGURATOR``, else
   the first one found; every other one is skipped with a warning. A name that matches no entry point configures
   nothing (the skipped ones only log warnings).
3. **Every instrumentor** whose entry point name is not listed in ``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS``.

Our distro's default ``OTEL_PYTHON_CONFIGURATOR=agentdiag`` therefore only helps when our distro is the one that
runs. With another distro installed too (e.g. ``opentelemetry-distro``, whose configurator builds the SDK's plain,
unredacted pipeline), set ``OTEL_PYTHON_DISTRO=agentdiag`` or ``OTEL_PYTHON_CONFIGURATOR=agentdiag`` explicitly.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING, Any, Final

from opentelemetry import trace
from opentelemetry.instrumentation.distro import BaseDistro  # type: ignore[attr-defined]  # module is untyped
from opentelemetry.instrumentation.environment_variables import OTEL_PYTHON_CONFIGURATOR
from opentelemetry.sdk._configuration import _BaseConfigurator

if TYPE_CHECKING:
    from otel_agentdiag.config import AgentDiag

_logger = logging.getLogger(__name__)

ENTRY_POINT_NAME: Final = "agentdiag"
"""The name of our ``opentelemetry_distro`` and ``opentelemetry_configurator`` entry points."""

ANTHROPIC_OPEN_TELEMETRY: Final = "ANTHROPIC_OPEN_TELEMETRY"
"""The ``anthropic`` SDK's (>= 2) switch for its own span per API call; ``false`` turns those spans off."""

DISTRO_DEFAULTS: Final[dict[str, str]] = {
    # Ours is the configurator opentelemetry-instrument runs, unless the user named another one.
    OTEL_PYTHON_CONFIGURATOR: ENTRY_POINT_NAME,
    # AnthropicInstrumentor owns the LLM span; the SDK's own span of the same call would be a duplicate.
    ANTHROPIC_OPEN_TELEMETRY: "false",
}
"""What :class:`AgentDiagDistro` sets when (and only when) the variable is not set already."""

_lock = threading.Lock()
_attempted = False
_handle: AgentDiag | None = None
"""The pipeline the configurator built, kept for the life of the process (its ``atexit`` hook flushes it)."""


class AgentDiagDistro(BaseDistro):  # type: ignore[misc]  # BaseDistro is Any to mypy
    """The ``opentelemetry_distro`` entry point ``agentdiag``: environment defaults, nothing else.

    Each of :data:`DISTRO_DEFAULTS` is set only when the variable is unset, so a user's own value always wins
    (e.g. ``ANTHROPIC_OPEN_TELEMETRY=true`` keeps the anthropic SDK's spans). Like every ``os.environ`` change,
    the defaults are inherited by processes the application starts.
    """

    def _configure(self, **kwargs: Any) -> None:
        for name, value in DISTRO_DEFAULTS.items():
            os.environ.setdefault(name, value)


class AgentDiagConfigurator(_BaseConfigurator):
    """The ``opentelemetry_configurator`` entry point ``agentdiag``: ``configure()`` from the environment alone.

    ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES`` name the service, ``AGENTDIAG_STORE`` places the store,
    ``OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT`` adds the OTLP branch, ``AGENTDIAG_ENABLED=false`` builds nothing. The
    ``OTEL_TRACES_EXPORTER`` / metrics / logs settings of the SDK's own configurator are not read.

    Never raises into the application: a failure is logged (its type, never its message) and the application runs
    untraced. Only the first call in a process does anything.
    """

    def _configure(self, **kwargs: Any) -> None:
        _configure_from_environment()


def _configure_from_environment() -> None:
    """Build the pipeline from the environment, once per process; log, never raise, on failure."""
    global _attempted, _handle
    with _lock:
        if _attempted:
            return
        _attempted = True
        try:
            from otel_agentdiag.config import configure

            handle = configure()
        except Exception as exc:  # noqa: BLE001 - the application must start even when tracing cannot
            _logger.error(
                "otel-agentdiag: zero-code configuration failed (%s); the application runs untraced",
                type(exc).__name__,
            )
            return
        _handle = handle
    if not handle.enabled:
        _logger.debug("otel-agentdiag: disabled by AGENTDIAG_ENABLED; nothing installed")
    elif trace.get_tracer_provider() is not handle.tracer_provider:
        _logger.warning(
            "otel-agentdiag: a global TracerProvider was already set; instrumentors trace into it, not into "
            "otel-agentdiag's pipeline"
        )
    else:
        _logger.debug("otel-agentdiag: zero-code pipeline installed (store %s)", handle.store_path)
