"""``configure()``'s batch processors honour the SDK's standard ``OTEL_BSP_*`` variables."""

from __future__ import annotations

import json
import logging
import sqlite3

import pytest

import otel_agentdiag as agentdiag
from otel_agentdiag import environment_variables as env
from otel_agentdiag.options import batch_settings_from_env
from otel_agentdiag.pipeline.batching import (
    DEFAULT_MAX_EXPORT_BATCH,
    DEFAULT_MAX_QUEUE_SPANS,
    DEFAULT_SCHEDULE_DELAY_S,
)

VARIABLES = (env.OTEL_BSP_MAX_QUEUE_SIZE, env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE, env.OTEL_BSP_SCHEDULE_DELAY)
HASH_KEY = "5f0a9bfb7740e2f5ce64d9ee6a8875283bc78032bd5c2ff8e65a69a50376460f"


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    for name in (*VARIABLES, "AGENTDIAG_STORE", "AGENTDIAG_HASH_KEY", "AGENTDIAG_ENABLED"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _settings(processor):
    return processor.max_queue_spans, processor.max_export_batch, processor.schedule_delay_s


def test_defaults_when_the_variables_are_unset(clean_env):
    with agentdiag.configure(store=clean_env / "traces.db", hash_key=HASH_KEY, set_global=False) as diag:
        (batching,) = diag.batch_processors
        assert _settings(batching) == (DEFAULT_MAX_QUEUE_SPANS, DEFAULT_MAX_EXPORT_BATCH, DEFAULT_SCHEDULE_DELAY_S)


def test_the_variables_size_every_destination(clean_env, monkeypatch):
    monkeypatch.setenv(env.OTEL_BSP_MAX_QUEUE_SIZE, "64")
    monkeypatch.setenv(env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE, " 16 ")
    monkeypatch.setenv(env.OTEL_BSP_SCHEDULE_DELAY, "250")
    diag = agentdiag.configure(
        store=clean_env / "traces.db",
        otlp_endpoint="http://127.0.0.1:4318",  # nothing is exported: no span is ended
        hash_key=HASH_KEY,
        set_global=False,
    )
    try:
        assert [d.name for d in diag.destinations] == ["local", "otlp"]
        assert [_settings(b) for b in diag.batch_processors] == [(64, 16, 0.25), (64, 16, 0.25)]
    finally:
        diag.shutdown()


@pytest.mark.parametrize("variable", VARIABLES)
@pytest.mark.parametrize("value", ["sk-not-a-number-SENTINEL", "0", "-3", "1.5", "1e3"])
def test_a_malformed_value_is_ignored_with_a_warning_that_never_echoes_it(
    clean_env, monkeypatch, caplog, variable, value
):
    monkeypatch.setenv(variable, value)
    with caplog.at_level(logging.WARNING, logger="otel_agentdiag"):
        settings = batch_settings_from_env()
    assert settings == {
        "max_queue_spans": DEFAULT_MAX_QUEUE_SPANS,
        "max_export_batch": DEFAULT_MAX_EXPORT_BATCH,
        "schedule_delay_s": DEFAULT_SCHEDULE_DELAY_S,
    }
    (record,) = caplog.records
    assert variable in record.getMessage() and "positive integer" in record.getMessage()
    assert "SENTINEL" not in record.getMessage()  # the value is never echoed


@pytest.mark.parametrize("value", ["", "   "])
def test_an_empty_value_means_unset_and_is_not_warned_about(clean_env, monkeypatch, caplog, value):
    for variable in VARIABLES:
        monkeypatch.setenv(variable, value)
    with caplog.at_level(logging.WARNING, logger="otel_agentdiag"):
        settings = batch_settings_from_env()
    assert settings["max_queue_spans"] == DEFAULT_MAX_QUEUE_SPANS
    assert caplog.records == []


def test_a_batch_larger_than_the_queue_is_lowered_to_it(clean_env, monkeypatch, caplog):
    monkeypatch.setenv(env.OTEL_BSP_MAX_QUEUE_SIZE, "8")
    monkeypatch.setenv(env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE, "100")
    with caplog.at_level(logging.WARNING, logger="otel_agentdiag"):
        settings = batch_settings_from_env()
    assert (settings["max_queue_spans"], settings["max_export_batch"]) == (8, 8)
    (record,) = caplog.records
    assert env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE in record.getMessage()


def test_a_small_queue_alone_lowers_the_default_batch_silently(clean_env, monkeypatch, caplog):
    monkeypatch.setenv(env.OTEL_BSP_MAX_QUEUE_SIZE, "8")
    with caplog.at_level(logging.WARNING, logger="otel_agentdiag"):
        settings = batch_settings_from_env()
    assert (settings["max_queue_spans"], settings["max_export_batch"]) == (8, 8)
    assert caplog.records == []


def test_the_queue_bound_holds_and_every_span_beyond_it_is_counted(clean_env, monkeypatch):
    """With the store's write lock held by another connection, the worker cannot export: the queue fills to
    ``OTEL_BSP_MAX_QUEUE_SIZE`` and every further span is dropped as ``queue_full``, counted in process and in
    the store; the queue's limit and peak are recorded with the observer."""
    monkeypatch.setenv(env.OTEL_BSP_MAX_QUEUE_SIZE, "8")
    path = clean_env / "traces.db"
    diag = agentdiag.configure(store=path, hash_key=HASH_KEY, set_global=False)
    tracer = diag.tracer_provider.get_tracer("batch-settings")  # type: ignore[union-attr]
    locker = sqlite3.connect(path, isolation_level=None)
    ended = 100
    try:
        locker.execute("BEGIN IMMEDIATE")
        for i in range(ended):
            tracer.start_span(f"step {i}", attributes={"gen_ai.conversation.id": "bounded"}).end()
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    assert diag.force_flush()
    diag.shutdown()

    totals = diag.stats()["destinations"]["local"]["pipeline"]["totals"]
    dropped = totals["dropped"].get("queue_full", 0)
    # At most one batch in flight (8) and a full queue (8) got through; the rest was dropped, and counted.
    assert totals["observed"] == ended == totals["accepted"] + dropped
    assert 8 <= totals["accepted"] <= 16
    with sqlite3.connect(path) as db:
        ((rows,),) = db.execute("SELECT COUNT(*) FROM spans").fetchall()
        ((limit, peak),) = db.execute("SELECT queue_limit, peak_queue FROM observers").fetchall()
        ledger = db.execute("SELECT observed, accepted, dropped FROM session_stats").fetchall()
    assert rows == totals["accepted"]
    assert (limit, peak) == (8, 8)
    assert sum(r[0] for r in ledger) == ended
    assert sum(r[1] for r in ledger) == totals["accepted"]
    assert sum(json.loads(r[2]).get("queue_full", 0) for r in ledger) == dropped


def test_a_malformed_batch_with_a_small_queue_warns_once_with_what_is_used(clean_env, monkeypatch, caplog):
    monkeypatch.setenv(env.OTEL_BSP_MAX_QUEUE_SIZE, "8")
    monkeypatch.setenv(env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE, "many")
    with caplog.at_level(logging.WARNING, logger="otel_agentdiag"):
        settings = batch_settings_from_env()
    assert (settings["max_queue_spans"], settings["max_export_batch"]) == (8, 8)
    (record,) = caplog.records
    assert record.getMessage().endswith(f"{env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE} is not a positive integer; using 8")
