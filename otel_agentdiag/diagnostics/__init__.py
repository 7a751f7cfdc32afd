"""Diagnostics over the pipeline and the store: receipts, status, the strict projection, bundles, push, the canary."""
