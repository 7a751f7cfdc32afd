"""Keep the README, CI and the code in sync."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from otel_agentdiag import environment_variables
from otel_agentdiag.cli import cli

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _first_code_block() -> list[str]:
    match = re.search(r"```bash\n(.*?)```", README, re.S)
    assert match, "README must open with a bash block"
    return [line for line in match.group(1).splitlines() if line and not line.startswith("#")]


def test_readme_opens_with_the_two_commands():
    assert README.index("```bash") < 40, "the commands must be on the first screen"
    demo, tests = _first_code_block()
    assert demo.endswith("agentdiag demo") and "pip install" in demo
    assert "pip install" in tests and tests.endswith("python -m pytest") and "[dev]" in tests


def test_ci_runs_the_readme_test_command_verbatim():
    _, tests = _first_code_block()
    ci = (ROOT / ".ci" / "run").read_text()
    assert tests in ci.splitlines()


def test_every_environment_variable_is_documented():
    names = [v for k, v in vars(environment_variables).items() if k.isupper() and k.startswith(("AGENTDIAG_", "OTEL_"))]
    assert names
    for name in names:
        assert f"`{name}`" in README, f"{name} is not in the README"


def test_every_cli_command_is_documented():
    assert cli.commands
    for name in cli.commands:
        assert f"`agentdiag {name}" in README, f"agentdiag {name} is not in the README"


def test_the_example_agent_runs(tmp_path):
    from otel_agentdiag.storage import SpanStore

    store, out = _run_example(tmp_path, "manual_agent.py", timeout=60)
    assert "gato means cat" in out
    with SpanStore(store, create=False) as opened:
        (summary,) = opened.list_traces()
        names = sorted(s.name for s in opened.get_trace(summary.trace_id))
    assert names == [
        "agent.iteration",
        "agent.iteration",
        "chat gpt-4o-mini",
        "chat gpt-4o-mini",
        "execute_tool lookup_word",
        "invoke_agent vocab-agent",
    ]


def test_what_leaves_your_process_is_generated_from_the_running_policies():
    from otel_agentdiag.redaction.describe import BEGIN, END, markdown

    start, end = README.index(BEGIN), README.index(END) + len(END)
    assert README[start:end] == markdown(), (
        "README 'What leaves your process' is stale: regenerate it with "
        "python -m otel_agentdiag.redaction.describe --write README.md"
    )


def test_every_key_the_demo_stores_is_listed_in_what_leaves_your_process(tmp_path):
    """Checked the other way round too: what a real run stores is in the README's table."""
    import fnmatch

    import otel_agentdiag as agentdiag
    from otel_agentdiag.demo import run_demo_agent
    from otel_agentdiag.redaction.describe import BEGIN, END
    from otel_agentdiag.storage import SpanStore

    section = README[README.index(BEGIN) : README.index(END)]
    attribute_table = section.split("Events kept")[0]
    listed = re.findall(r"^\| `([^`]+)` \|", attribute_table, re.M)
    assert len(listed) > 20
    store = tmp_path / "t.db"
    with agentdiag.configure(store=store, set_global=False):
        result = run_demo_agent()
    with SpanStore(store, create=False) as reader:
        spans = reader.get_trace(result.trace_id)
    keys = {key for span in spans for key in span.attributes}
    keys |= {key for span in spans for event in span.events for key in event["attributes"]}
    assert keys
    for key in keys:
        assert any(fnmatch.fnmatchcase(key, pattern) for pattern in listed), f"{key} is stored but not in the README"


def test_the_policy_file_example_in_the_docs_loads(tmp_path):
    from otel_agentdiag.redaction import policy as p

    docs = (ROOT / "docs" / "policy.md").read_text()
    match = re.search(r"```toml\n(.*?)```", docs, re.S)
    assert match
    path = tmp_path / "my-policy.toml"
    path.write_text(match.group(1))
    loaded = p.load_policy(path)
    assert loaded.name == "strict+billing"
    assert isinstance(loaded.rule_for("vendor.metrics.latency"), p.FloatRange)
    assert loaded.rule_for("gen_ai.request.seed") is None
    assert loaded.is_blocked("ACME-INTERNAL-42")


def test_the_redacting_processor_example_in_the_docs_runs_and_exports_only_digests(tmp_path):
    import subprocess
    import sys

    docs = (ROOT / "docs" / "policy.md").read_text()
    match = re.search(r"\*\*The fix:.*?```python\n(.*?)```", docs, re.S)
    assert match, "docs/policy.md shows redacting_processor() in a python block"
    done = subprocess.run(
        [sys.executable, "-c", match.group(1)], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert "invoke_agent demo-agent" in done.stdout and "execute_tool lookup" in done.stdout
    for raw in ("conv-42", "alice@example.com", "call_1"):
        assert raw not in done.stdout  # the console exporter got digests only
    assert done.stdout.count('"gen_ai.conversation.id": "hmac-sha256:') == 2
    assert "before redaction" not in done.stderr  # configure() found no foreign processor


def _run_example(tmp_path, name: str, *args: str, timeout: float = 120):
    import subprocess
    import sys

    store = tmp_path / "example.db"
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name), "--store", str(store), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    return store, done.stdout


@pytest.mark.parametrize("stream", [False, True])
def test_the_openai_agents_example_prints_its_tree_and_its_receipt_is_valid(tmp_path, stream):
    pytest.importorskip("agents", reason="the openai-agents package (the `openai-agents` extra) is not installed")
    store, out = _run_example(tmp_path, "openai_agents_weather.py", *(["--stream"] if stream else []))
    lines = [re.split(r"  (?=\d)", line)[0] for line in out.splitlines() if line]
    assert lines[2:] == [
        "✓ invoke_agent weather_agent",
        "├─ ✓ agent.iteration #1",
        "│  ├─ ✓ chat gpt-4o-mini",
        "│  └─ ✓ execute_tool get_weather",
        "└─ ✓ agent.iteration #2",
        "   └─ ✓ chat gpt-4o-mini",
    ]
    assert _receipt_statuses(store) == ["valid"]


def test_the_langgraph_example_prints_its_tree_and_its_receipt_is_valid(tmp_path):
    pytest.importorskip("langchain", reason="langchain (the `langchain` extra) is not installed")
    store, out = _run_example(tmp_path, "langgraph_react.py", "--stream")
    lines = out.splitlines()
    assert lines[0] == "Sunny, 21 degrees in Paris."
    assert "invoke_agent weather_agent" in lines[2] and "conversation=hmac-sha256:" in lines[2]
    assert [line.count("agent.iteration") for line in lines[3:]] == [1, 0, 1, 0, 1, 0]
    assert "execute_tool get_weather" in lines[6] and "thread-42" not in out
    assert _receipt_statuses(store) == ["valid"]


def _receipt_statuses(store):
    from otel_agentdiag.diagnostics.receipt import session_receipts
    from otel_agentdiag.storage import SpanStore

    with SpanStore(store, create=False) as reader:
        receipts, _ = session_receipts(reader)
    return [r.status for r in receipts]
