from otel_agentdiag.cli import main

main()
