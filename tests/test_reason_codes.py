"""``_internal.reason_codes``: each stored reason code is written once in the package, and its value never changes."""

from __future__ import annotations

import ast
from pathlib import Path

from otel_agentdiag._internal import reason_codes
from otel_agentdiag.diagnostics import verdict
from otel_agentdiag.pipeline import ledger
from otel_agentdiag.redaction import reasons
from otel_agentdiag.storage import rows

PACKAGE = Path(reason_codes.__file__).resolve().parents[1]
HOME = Path(reason_codes.__file__).resolve()

STORED = {
    "QUEUE_FULL": "queue_full",
    "EXPORT_FAILURE": "export_failure",
    "SHUTDOWN": "shutdown",
    "CLEARED": "cleared",
    "REDACTOR_ERROR": "redactor_error",
    "PUBLIC_SAFETY_VIOLATION": "public_safety_violation",
    "UNREGISTERED_NAME": "unregistered_name",
    "SEQUENCE_GAP": "sequence_gap",
    "DUPLICATE_SEQUENCE": "duplicate_sequence",
    "BACKPRESSURE_DROP": "backpressure_drop",
    "UNFINISHED_SPAN": "unfinished_span",
    "STATS_MISSING": "stats_missing",
    "LEDGER_INVALID": "ledger_invalid",
    "INGEST_VIOLATION": "ingest_violation",
    "NO_OBSERVATIONS": "no_observations",
}
"""The codes as stores and receipts already hold them: a contract."""

OTHER_VOCABULARY = {("cli/health.py", "cleared"), ("diagnostics/verdict.py", "cleared")}
"""The same word in another vocabulary: why a session has nothing to judge (cleared, pruned, empty)."""


def test_the_values_are_the_stored_ones() -> None:
    assert {name: getattr(reason_codes, name) for name in STORED} == STORED
    assert reason_codes.DROP_CAUSES == ("queue_full", "export_failure", "shutdown", "cleared")
    assert reason_codes.TOMBSTONE_COUNTER == "agentdiag.redaction.redactor_error"
    assert reason_codes.PUBLIC_SAFETY_COUNTER == "agentdiag.redaction.public_safety_violation"


def test_each_layer_speaks_the_same_codes() -> None:
    assert ledger.DROP_CAUSES == rows.DROP_CAUSES == reason_codes.DROP_CAUSES
    redactor_error = {
        ledger.REDACTOR_ERROR,
        rows.REJECT_REDACTOR_ERROR,
        verdict.REDACTOR_ERROR,
        reasons.REDACTOR_ERROR,
    }
    assert redactor_error == {"redactor_error"}
    assert reasons.PUBLIC_SAFETY_VIOLATION == verdict.PUBLIC_SAFETY_VIOLATION == "public_safety_violation"


def test_no_other_module_writes_a_code_out() -> None:
    """A string literal equal to a code, anywhere in the package but ``reason_codes``, is a second definition
    waiting to drift (or a code used by value): import the constant instead."""
    codes = set(STORED.values())
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.resolve() == HOME:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in codes:
                found.add((path.relative_to(PACKAGE).as_posix(), node.value))
    assert found - OTHER_VOCABULARY == set()
