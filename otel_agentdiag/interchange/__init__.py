"""Moving traces between the local store and other tools: OTLP-JSON and Jaeger-JSON files, and ingest.

- :func:`write_otlp_json` / :func:`read_otlp_json`: the OTLP ``ExportTraceServiceRequest`` JSON encoding, one
  document per line (the Collector's ``file`` exporter and ``otlpjsonfile`` receiver format).
- :func:`write_jaeger_json`: the format Jaeger UI's "upload JSON" and Grafana's Jaeger "Import trace" accept.
- :func:`ingest_otlp_json`: OTLP-JSON into a store: untrusted input, re-checked through the local policy and
  filed as imported (never as observed; see :mod:`otel_agentdiag.storage.provenance`).

Writers take spans as given: hand them the strict-policy projection
(:func:`otel_agentdiag.diagnostics.projection.strict_projection`), never raw spans.
"""

from otel_agentdiag.interchange.ingest import ingest_otlp_json
from otel_agentdiag.interchange.jaeger_json import write_jaeger_json
from otel_agentdiag.interchange.otlp_json import read_otlp_json, write_otlp_json

__all__ = ["ingest_otlp_json", "read_otlp_json", "write_jaeger_json", "write_otlp_json"]
