"""Which tracer provider otel-agentdiag's own spans go to: the one ``configure()`` chose, else the global one.

The manual wrappers and every instrumentor read it here; :func:`otel_agentdiag.configure` sets it with
:func:`use_tracer_provider`, so they trace into the pipeline it built even when that provider is not the
global one.
"""

from __future__ import annotations

from opentelemetry import trace

from otel_agentdiag.version import __version__

__all__ = ["manual_tracer", "tracer_for", "tracer_provider_in_use", "use_tracer_provider"]
_TRACER_NAME = "otel_agentdiag"

_tracer: trace.Tracer | None = None
_provider: trace.TracerProvider | None = None


def use_tracer_provider(tracer_provider: trace.TracerProvider | None) -> None:
    """Make the wrappers trace into ``tracer_provider`` (``None``: back to the global provider).

    :func:`otel_agentdiag.configure` calls this, so the wrappers use the pipeline it built even when that
    provider is not the global one.
    """
    global _tracer, _provider
    _provider = tracer_provider
    _tracer = None if tracer_provider is None else tracer_provider.get_tracer(_TRACER_NAME, __version__)


def tracer_provider_in_use() -> trace.TracerProvider | None:
    """The provider given to :func:`use_tracer_provider`, or ``None`` (the global provider)."""
    return _provider


def manual_tracer() -> trace.Tracer:
    """The tracer of the manual wrappers: the chosen provider's, else the global provider's."""
    tracer = _tracer
    if tracer is None:
        # A ProxyTracer until a global provider is set; it follows the global provider from then on.
        tracer = trace.get_tracer(_TRACER_NAME, __version__)
    return tracer


def tracer_for(name: str, tracer_provider: trace.TracerProvider | None) -> trace.Tracer:
    """The tracer an instrumentor uses: the provider it was given, else the one ``configure()`` built, else the
    global provider (a proxy that follows a provider set later)."""
    if tracer_provider is None:
        tracer_provider = _provider
    return trace.get_tracer(name, __version__, tracer_provider)
