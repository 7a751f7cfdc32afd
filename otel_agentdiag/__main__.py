"""``python -m otel_agentdiag``: the same as the ``agentdiag`` command."""

from otel_agentdiag.cli import main

main()
