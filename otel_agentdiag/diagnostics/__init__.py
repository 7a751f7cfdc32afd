"""Diagnostics over the pipeline and the store: the redaction canary (and, later, receipts and status)."""
