"""Start-up: what ``import otel_agentdiag``, ``configure()`` and the ``agentdiag`` command load, in fresh processes.

The times are in ``benchmarks/startup.py``; here, which modules each process holds afterwards (``sys.modules``),
and that the lazy names are the very objects the eager package exported.
"""

from __future__ import annotations

import importlib
import json
import os
import sqlite3
import subprocess
import sys

import click
import pytest

import otel_agentdiag
from otel_agentdiag.cli import COMMANDS, _Group, _LazyCommands, cli

# Where each public name came from when the package imported them all eagerly (the source of truth for the test).
EAGER_SOURCES = {
    "otel_agentdiag.config": ["AgentDiag", "AgentDiagOptions", "configure"],
    "otel_agentdiag.cost": ["Budget", "PriceTableError"],
    "otel_agentdiag.exporters.sqlite": ["SQLiteSpanExporter"],
    "otel_agentdiag.instrumentation.manual": [
        "LLMCall",
        "agent",
        "agent_run",
        "iteration",
        "llm_call",
        "register_names",
        "tool",
        "tool_call",
    ],
    "otel_agentdiag.pipeline.audit": ["ForeignProcessor", "foreign_processors"],
    "otel_agentdiag.redacting": ["redacting_processor"],
    "otel_agentdiag.redaction": ["IdHasher", "Policy", "PolicyError", "RedactingSpanProcessor", "load_policy"],
    "otel_agentdiag.storage": ["SpanStore", "StoreError"],
    "otel_agentdiag.version": ["__version__"],
}

# Never needed by a plain configure() (nor by importing the package): the readers' and the tools' side.
NOT_FOR_CONFIGURE = (
    "otel_agentdiag.cli",
    "otel_agentdiag.diagnostics",
    "otel_agentdiag.interchange",
    "otel_agentdiag.content",
    "otel_agentdiag.demo",
    "otel_agentdiag.redaction.collector",
    "otel_agentdiag.redaction.describe",
    "click",
    "yaml",
)
# What `agentdiag --version` / `--help` need none of.
NOT_FOR_VERSION = (
    "opentelemetry.sdk",
    "otel_agentdiag.storage",
    "otel_agentdiag.redaction",
    "otel_agentdiag.pipeline",
    "otel_agentdiag.exporters",
    "otel_agentdiag.diagnostics",
    "otel_agentdiag.interchange",
    "otel_agentdiag.content",
    "otel_agentdiag.config",
    # Every command module and the renderers (cli._common is the group's own plumbing: errors, exit codes).
    *sorted({module for module, _ in COMMANDS.values()}),
    "otel_agentdiag.cli._render",
    "otel_agentdiag.cli._duration",
    "sqlite3",
    "yaml",
)
# What reading and rendering one trace (`agentdiag show`) needs none of.
NOT_FOR_SHOW = (
    "opentelemetry.sdk",
    "opentelemetry.exporter",
    "otel_agentdiag.pipeline",
    "otel_agentdiag.exporters",
    "otel_agentdiag.redaction",
    "otel_agentdiag.config",
    "otel_agentdiag.diagnostics",
    "otel_agentdiag.interchange",
    "otel_agentdiag.content",
    "otel_agentdiag.instrumentation",
    "otel_agentdiag.cli.health",
    "otel_agentdiag.cli.push",
    "otel_agentdiag.cli.export",
    "yaml",
)


def _loaded(code: str, *args: str) -> list[str]:
    """Run ``code`` in a fresh interpreter; the modules it holds at the end (``sys.modules``)."""
    probe = (
        "import json, sys\n"
        "try:\n" + "".join(f"    {line}\n" for line in code.splitlines()) + "except SystemExit:\n    pass\n"
        "sys.stdout.flush()\n"
        "sys.stderr.write('\\nMODULES=' + json.dumps(sorted(sys.modules)) + '\\n')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, *args], capture_output=True, text=True, check=False, timeout=120
    )
    marker = done.stderr.rfind("MODULES=")
    assert marker >= 0, done.stderr
    modules: list[str] = json.loads(done.stderr[marker + len("MODULES=") :])
    return modules


def _offending(modules: list[str], prefixes: tuple[str, ...]) -> list[str]:
    """The modules named by ``prefixes``: a package and everything under it, or (ending in ``.``) only under it."""
    return [
        m
        for m in modules
        if any(m.startswith(p) if p.endswith(".") else (m == p or m.startswith(p + ".")) for p in prefixes)
    ]


def test_import_loads_none_of_the_pipeline_readers_or_tools():
    modules = _loaded("import otel_agentdiag")
    assert "otel_agentdiag" in modules
    assert _offending(modules, (*NOT_FOR_CONFIGURE, *NOT_FOR_VERSION)) == []


def test_the_quick_start_import_loads_none_of_the_readers_or_tools():
    modules = _loaded("from otel_agentdiag import configure, agent_run, iteration, llm_call, tool_call")
    assert "otel_agentdiag.instrumentation.manual" in modules
    assert _offending(modules, NOT_FOR_CONFIGURE) == []


def test_a_plain_configure_loads_none_of_the_readers_or_tools(tmp_path):
    code = (
        "import otel_agentdiag as agentdiag\n"
        "handle = agentdiag.configure(store=sys.argv[1], service_name='startup-test')\n"
        "with agentdiag.agent_run('startup-test'):\n"
        "    pass\n"
        "handle.shutdown()\n"
    )
    store = tmp_path / "store" / "traces.db"
    modules = _loaded(code, str(store))
    assert "otel_agentdiag.pipeline.build" in modules and "opentelemetry.sdk.trace" in modules
    assert _offending(modules, NOT_FOR_CONFIGURE) == []
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        assert conn.execute("SELECT COUNT(*) FROM spans").fetchone()[0] == 1
    finally:
        conn.close()


@pytest.mark.parametrize("flag", ["--version", "--help"])
def test_version_and_help_load_neither_the_sdk_nor_any_command(flag):
    code = f"sys.argv = ['agentdiag', {flag!r}]\nfrom otel_agentdiag.cli import main\nmain()\n"
    modules = _loaded(code)
    assert "otel_agentdiag.cli" in modules and "click" in modules
    assert _offending(modules, NOT_FOR_VERSION) == []


def test_show_loads_only_the_store_and_the_renderer(tmp_path):
    store = tmp_path / "demo" / "traces.db"
    env = {name: value for name, value in os.environ.items() if name != "AGENTDIAG_STORE"}
    demo = subprocess.run(
        [sys.executable, "-m", "otel_agentdiag", "demo", "--store", str(store)],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        timeout=120,
    )
    assert demo.returncode == 0, demo.stderr
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        (trace_id,) = conn.execute("SELECT trace_id FROM spans ORDER BY start_ns LIMIT 1").fetchone()
    finally:
        conn.close()
    code = (
        "sys.argv = ['agentdiag', 'show', sys.argv[1], '--store', sys.argv[2]]\n"
        "from otel_agentdiag.cli import main\n"
        "main()\n"
    )
    modules = _loaded(code, trace_id, str(store))
    assert "otel_agentdiag.cli.traces" in modules and "otel_agentdiag.storage.queries" in modules
    assert _offending(modules, NOT_FOR_SHOW) == []


def test_every_public_name_is_the_object_the_eager_package_exported():
    assert sorted(name for names in EAGER_SOURCES.values() for name in names) == sorted(otel_agentdiag.__all__)
    for module, names in EAGER_SOURCES.items():
        source = importlib.import_module(module)
        for name in names:
            assert getattr(otel_agentdiag, name) is getattr(source, name), name
    assert set(otel_agentdiag.__all__) <= set(dir(otel_agentdiag))


def test_star_import_and_submodule_attributes_work_in_a_fresh_process():
    code = (
        "from otel_agentdiag import *\n"
        "import otel_agentdiag\n"
        "missing = [n for n in otel_agentdiag.__all__ if n not in globals()]\n"
        "assert not missing, missing\n"
        "assert otel_agentdiag.config.configure is configure\n"
        "assert otel_agentdiag.storage.SpanStore is SpanStore\n"
        "try:\n"
        "    otel_agentdiag.no_such_name\n"
        "except AttributeError:\n"
        "    print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_config_offers_its_documented_names_only():
    """The re-exports kept for the pre-split module are gone: the names live where they are defined."""
    from otel_agentdiag import config, options
    from otel_agentdiag.pipeline import handle

    assert config.AgentDiag is handle.AgentDiag
    assert config.AgentDiagOptions is options.AgentDiagOptions
    assert sorted(config.__all__) == ["AgentDiag", "AgentDiagOptions", "configure"]
    for gone in ("_resolve", "resolve_destinations", "LOCAL_DESTINATION", "batch_settings_from_env", "hash_keys"):
        with pytest.raises(AttributeError):
            getattr(config, gone)


def _eager_twin() -> click.Group:
    """The group as it was before: every command imported and registered, click's own help listing."""
    eager = click.Group(
        name=cli.name,
        commands={name: cli.commands[name] for name in COMMANDS},
        params=cli.params,
        help=cli.help,
        context_settings=cli.context_settings,
    )
    return eager


def test_help_lists_the_commands_as_click_does_without_importing_them():
    eager = _eager_twin()
    for width in range(50, 420, 9):
        lazy = _Group(
            name=cli.name,
            commands=_LazyCommands(COMMANDS),
            params=cli.params,
            help=cli.help,
            context_settings=cli.context_settings,
        )
        lazy_help = lazy.get_help(click.Context(lazy, terminal_width=width, max_content_width=width))
        eager_help = eager.get_help(click.Context(eager, terminal_width=width, max_content_width=width))
        assert lazy_help == eager_help, width
        assert lazy.commands._loaded == {}  # type: ignore[attr-defined]


def test_each_commands_static_help_is_its_docstrings_first_paragraph():
    for name, (module, first) in COMMANDS.items():
        command = getattr(importlib.import_module(module), name)
        assert command.name == name
        assert command.short_help is None and not command.hidden and not command.deprecated
        assert (command.help or "").split("\n\n")[0].split() == first.split(), name


def test_the_command_mapping_behaves_as_a_dict():
    commands = _LazyCommands(COMMANDS)
    assert list(commands) == list(COMMANDS) and len(commands) == len(COMMANDS)
    assert "show" in commands and "nope" not in commands
    assert commands.get("nope") is None
    with pytest.raises(KeyError):
        commands["nope"]
    assert commands["show"] is cli.commands["show"]
    extra = click.Command("extra")
    commands["extra"] = extra
    assert list(commands)[-1] == "extra" and commands["extra"] is extra
    del commands["extra"]
    assert "extra" not in commands


# What `agentdiag show` needs none of inside the store: the writer, maintenance (retention, scrubbing), the violation
# log, the push marks, the ledger and the full ``SpanStore`` class that holds them all; nor ``logging`` (imported
# where a warning is logged).
NOT_FOR_SHOW_STORE = (
    "otel_agentdiag.storage.store",
    "otel_agentdiag.storage.writer",
    "otel_agentdiag.storage.maintenance",
    "otel_agentdiag.storage.retention",
    "otel_agentdiag.storage.scrub",
    "otel_agentdiag.storage.violations",
    "otel_agentdiag.storage.push_marks",
    "otel_agentdiag.storage.ledger",
    "logging",
)

# Where each public name of ``otel_agentdiag.storage`` came from when that package imported them all eagerly.
STORAGE_EAGER_SOURCES = {
    "otel_agentdiag.storage.migrations": ["LATEST_VERSION", "StoreError"],
    "otel_agentdiag.storage.retention": ["STORE_DROPPED_ATTRIBUTES", "STORE_DROPPED_EVENTS", "RetentionLimits"],
    "otel_agentdiag.storage.scrub": ["ScrubIncomplete", "ScrubReport"],
    "otel_agentdiag.storage.store": ["SpanStore"],
    "otel_agentdiag.storage.rows": [
        "ALL_SESSIONS",
        "DROP_CAUSES",
        "DROP_CLEARED",
        "DROP_EXPORT_FAILURE",
        "DROP_QUEUE_FULL",
        "DROP_SHUTDOWN",
        "OVERFLOW_SESSION",
        "REJECT_REDACTOR_ERROR",
        "Accounting",
        "ContentRow",
        "ConversationSummary",
        "ObserverInfo",
        "PruneResult",
        "RunSummary",
        "SessionStats",
        "SessionSummary",
        "SpanRow",
        "StoredContent",
        "StoredSpan",
        "StoreSummary",
        "TraceSummary",
        "WriteResult",
    ],
}


def _demo_trace(tmp_path) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    store = tmp_path / "demo" / "traces.db"
    env = {name: value for name, value in os.environ.items() if name != "AGENTDIAG_STORE"}
    demo = subprocess.run(
        [sys.executable, "-m", "otel_agentdiag", "demo", "--store", str(store)],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        timeout=120,
    )
    assert demo.returncode == 0, demo.stderr
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        (trace_id,) = conn.execute("SELECT trace_id FROM spans ORDER BY start_ns LIMIT 1").fetchone()
    finally:
        conn.close()
    return trace_id, str(store)


@pytest.mark.parametrize("command", ["show", "traces"])
def test_show_and_traces_read_without_the_writer_maintenance_or_retention(tmp_path, command):
    trace_id, store = _demo_trace(tmp_path)
    args = "[sys.argv[1], '--store', sys.argv[2]]" if command == "show" else "['--store', sys.argv[2]]"
    code = (
        f"sys.argv = ['agentdiag', {command!r}, *{args}]\n"
        "from otel_agentdiag.cli import main\n"
        "main()\n"
        "print('MISSED SYSTEMEXIT')\n"
    )
    probe = (
        "import json, sys\n"
        "try:\n" + "".join(f"    {line}\n" for line in code.splitlines()) + "except SystemExit as exc:\n"
        "    sys.stderr.write(f'\\nEXIT={exc.code}\\n')\n"
        "sys.stdout.flush()\n"
        "sys.stderr.write('\\nMODULES=' + json.dumps(sorted(sys.modules)) + '\\n')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, trace_id, store], capture_output=True, text=True, check=False, timeout=120
    )
    assert "\nEXIT=0\n" in done.stderr or "\nEXIT=None\n" in done.stderr, done.stderr
    assert trace_id in done.stdout and "invoke_agent" in done.stdout  # it did read and print the trace
    modules = json.loads(done.stderr[done.stderr.rfind("MODULES=") + len("MODULES=") :])
    assert "otel_agentdiag.storage.reading" in modules and "otel_agentdiag.storage.queries" in modules
    assert _offending(modules, (*NOT_FOR_SHOW, *NOT_FOR_SHOW_STORE)) == []


def test_every_storage_name_is_the_object_the_eager_storage_package_exported():
    import otel_agentdiag.storage as storage

    names = sorted(name for names in STORAGE_EAGER_SOURCES.values() for name in names)
    assert names == sorted(storage.__all__)
    for module, module_names in STORAGE_EAGER_SOURCES.items():
        source = importlib.import_module(module)
        for name in module_names:
            assert getattr(storage, name) is getattr(source, name), name
    assert set(storage.__all__) <= set(dir(storage))


def test_storage_star_import_and_submodule_attributes_work_in_a_fresh_process():
    code = (
        "from otel_agentdiag.storage import *\n"
        "import otel_agentdiag.storage as storage\n"
        "missing = [n for n in storage.__all__ if n not in globals()]\n"
        "assert not missing, missing\n"
        "assert storage.writer.StoreWriter in SpanStore.__mro__\n"
        "assert storage.summaries.REBUILD\n"
        "from otel_agentdiag.storage import maintenance, reading\n"
        "assert reading.ReadOnlyStore.__mro__[1].__name__ == 'StoreReader'\n"
        "try:\n"
        "    storage.no_such_name\n"
        "except AttributeError:\n"
        "    print('OK')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "OK", done.stderr
