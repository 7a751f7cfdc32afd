"""Run in the ``jaeger_client`` test environment: jaeger-mcp's ``JaegerClient`` (an independent client of the
Jaeger query API) against ``JAEGER_URL``; prints what it read as one JSON object."""

from __future__ import annotations

import json
import sys

from jaeger_mcp.facade import JaegerClient


def main() -> None:
    service = sys.argv[1]
    client = JaegerClient.from_env()
    try:
        services = client.list_services()
        summaries = client.search_traces(service, limit=10)
        trace = client.get_trace(summaries[0].trace_id)
        dependencies = client.get_dependencies(lookback_hours=1)
        path = client.critical_path(trace.trace_id)
    finally:
        try:
            client.close()
        except RuntimeError:  # jaeger-mcp 0.6.1's sync close() after its per-call event loops have closed
            pass
    print(
        json.dumps(
            {
                "services": services,
                "found": [s.trace_id for s in summaries],
                "root_service": summaries[0].root_service,
                "span_count": summaries[0].span_count,
                "errors": summaries[0].errors_count,
                "trace_spans": len(trace.spans),
                "trace_root": trace.root_operation,
                "trace_errors": trace.errors_count,
                "operations": sorted({s.operation for s in trace.spans}),
                "dependencies": len(dependencies),
                "critical_path": type(path).__name__,
            }
        )
    )


if __name__ == "__main__":
    main()
