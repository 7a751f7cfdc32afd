"""Keep the README, the docs pages, CI and the code in sync: every command and code block is run or checked."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest

from otel_agentdiag import environment_variables
from otel_agentdiag.cli import cli

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
DOCS = ROOT / "docs"
# Where the README's reference sections moved (the README links to each).
CONFIGURATION = (DOCS / "configuration.md").read_text()
CLI_REFERENCE = (DOCS / "cli.md").read_text()
REDACTION = (DOCS / "redaction.md").read_text()
PAGES = {"README.md": README, **{f"docs/{p.name}": p.read_text() for p in sorted(DOCS.glob("*.md"))}}


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
        assert f"`{name}`" in CONFIGURATION, f"{name} is not in docs/configuration.md"


def test_every_cli_command_is_documented():
    assert cli.commands
    for name in cli.commands:
        assert f"`agentdiag {name}" in README, f"agentdiag {name} is not in the README's command list"
        assert f"`agentdiag {name}" in CLI_REFERENCE, f"agentdiag {name} is not in docs/cli.md"


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

    start, end = REDACTION.index(BEGIN), REDACTION.index(END) + len(END)
    assert REDACTION[start:end] == markdown(), (
        "docs/redaction.md 'What leaves your process' is stale: regenerate it with "
        "python -m otel_agentdiag.redaction.describe --write docs/redaction.md"
    )


def test_every_key_the_demo_stores_is_listed_in_what_leaves_your_process(tmp_path):
    """Checked the other way round too: what a real run stores is in docs/redaction.md's table."""
    import fnmatch

    import otel_agentdiag as agentdiag
    from otel_agentdiag.demo import run_demo_agent
    from otel_agentdiag.redaction.describe import BEGIN, END
    from otel_agentdiag.storage import SpanStore

    section = REDACTION[REDACTION.index(BEGIN) : REDACTION.index(END)]
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
        assert any(fnmatch.fnmatchcase(key, pattern) for pattern in listed), f"{key} is stored but not documented"


def test_the_policy_file_example_in_the_docs_loads(tmp_path):
    import otel_agentdiag.redaction as p

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
        "├─ ✓ agent.iteration #0",
        "│  ├─ ✓ chat gpt-4o-mini",
        "│  └─ ✓ execute_tool get_weather",
        "└─ ✓ agent.iteration #1",
        "   └─ ✓ chat gpt-4o-mini",
    ]
    assert _receipt_statuses(store) == ["valid"]


def test_the_langgraph_example_prints_its_tree_and_its_receipt_is_valid(tmp_path):
    pytest.importorskip("langchain", reason="langchain (the `langchain` extra) is not installed")
    store, out = _run_example(tmp_path, "langgraph_react.py", "--stream")
    lines = out.splitlines()
    assert lines[0] == "Sunny, 21 degrees in Paris."
    assert "invoke_agent weather_agent" in lines[2] and "conversation=hmac-sha256:" in lines[2]
    # One iteration per model call, holding the tool call it asked for (LangGraph's tool step joins it).
    assert [line.count("agent.iteration") for line in lines[3:]] == [1, 0, 0, 1, 0]
    assert "execute_tool get_weather" in lines[5] and "thread-42" not in out
    assert _receipt_statuses(store) == ["valid"]


def _receipt_statuses(store):
    from otel_agentdiag.diagnostics.receipt import session_receipts
    from otel_agentdiag.storage import SpanStore

    with SpanStore(store, create=False) as reader:
        receipts, _ = session_receipts(reader)
    return [r.status for r in receipts]


# --- The README is a short read; the reference lives in docs/ -------------------------------------------------


def test_the_readme_stays_a_short_read():
    assert len(README.splitlines()) <= 310, "move detail to a docs/ page and link to it"
    assert "pip install 'otel-agentdiag" not in README and "pip install otel-agentdiag" not in README


def _section(text: str, heading: str) -> str:
    return text.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]


def _pyproject_extras() -> set[str]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    return set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])


def test_the_install_table_names_every_extra_and_only_real_ones():
    section = _section(README, "## Which install do I need")
    assert "not on PyPI" in section and "python -m build" in section and "pip wheel" in section
    rows = [line for line in section.splitlines() if line.startswith("| ") and "pip install" in line]
    assert rows
    for row in rows:
        assert re.search(r"`pip install -e '?\.", row), f"an install line that does not work from a checkout: {row}"
    listed = {extra for row in rows for group in re.findall(r"\.\[([^\]]+)\]", row) for extra in group.split(",")}
    assert listed == _pyproject_extras()


def test_every_pip_install_line_in_the_docs_names_real_extras():
    extras = _pyproject_extras()
    seen = 0
    for name, text in PAGES.items():
        assert "pip install 'otel-agentdiag" not in text, f"{name}: the package is not on PyPI; use pip install -e"
        for group in re.findall(r"(?<![\w/.])\.\[([a-z0-9,\- ]+)\]", text):
            seen += 1
            for extra in group.split(","):
                assert extra.strip() in extras, f"{name}: .[{group}] names an extra pyproject.toml does not define"
    assert seen > 10


def _demo_tree(text: str) -> list[tuple[str, str, str]]:
    """(tree prefix, status mark, span name) of each line of an ``agentdiag show`` tree."""
    rows = []
    for line in text.splitlines():
        match = re.match(r"^([│├└─ ]*)([✓✗…]) (.+?)  ", line)
        if match:
            rows.append(match.groups())
    return rows


def test_the_readme_trace_has_the_shape_of_a_real_demo_run(tmp_path):
    block = re.search(r"```text\n(trace [0-9a-f]{32} .*?)```", _section(README, "## A real trace"), re.S)
    assert block, "the README shows `agentdiag show` of the demo in a text block"
    env = {**os.environ, "PYTHONIOENCODING": "utf-8", "AGENTDIAG_STORE": str(tmp_path / "t.db")}
    done = subprocess.run(
        [sys.executable, "-m", "otel_agentdiag", "demo"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    real = done.stdout[done.stdout.index("\ntrace ") + 1 :].split("\n\n", 1)[0]
    shown = block.group(1)

    def header(text: str) -> str:
        return re.sub(r"^trace [0-9a-f]{32}  (\d+ spans)  [\d.]+ \S+  ", r"\1  ", text.splitlines()[0])

    assert header(shown) == header(real)
    assert _demo_tree(real) and _demo_tree(shown) == _demo_tree(real)


def _run_python(code: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run a documentation block as a script, offline: no OTLP endpoint, a proxy nobody answers on."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTDIAG_", "OTEL_", "OPENAI_", "ANTHROPIC_"))}
    env |= {"HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9", "NO_PROXY": "127.0.0.1,localhost"}
    script = cwd / "block.py"
    script.write_text(code)
    return subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env
    )


def test_the_quick_start_runs_exactly_as_written(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from otel_agentdiag.storage import SpanStore

    section = _section(README, "## Quick start")
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code
    for name in (
        "configure(",
        "register_names(",
        "agent_run(",
        "iteration(",
        "llm_call(",
        "record_response(",
        "tool_call(",
    ):
        assert name in code.group(1)
    done = _run_python(code.group(1), tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "It is Sunny, 24 C in Lisbon.\n"
    with SpanStore(tmp_path / ".agentdiag" / "traces.db", create=False) as opened:
        (summary,) = opened.list_traces()
        names = sorted(s.name for s in opened.get_trace(summary.trace_id))
    assert names == [
        "agent.iteration",
        "agent.iteration",
        "chat gpt-4o-mini",
        "chat gpt-4o-mini",
        "execute_tool get_weather",
        "invoke_agent trip-planner",
    ]
    # Then the two commands the README shows next, from the same folder.
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AGENTDIAG_STORE", raising=False)
    listed = CliRunner().invoke(cli, ["traces"])
    assert listed.exit_code == 0 and summary.trace_id in listed.output
    shown = CliRunner().invoke(cli, ["show", summary.trace_id[:8]])
    assert shown.exit_code == 0 and "execute_tool get_weather" in shown.output


def _blocks(language: str) -> list[tuple[str, int, str]]:
    """(page, line, body) of every fenced block of one language in the README and docs/*.md."""
    found = []
    for name, text in PAGES.items():
        for match in re.finditer(rf"^```{language}\n(.*?)^```", text, re.S | re.M):
            found.append((name, text[: match.start()].count("\n") + 1, match.group(1)))
    return found


# Python blocks that are only compiled, never run, with the reason (a substring of the block -> why). Every other
# ```python block in the README and docs/*.md runs as a script in a fresh folder, offline.
COMPILE_ONLY: dict[str, str] = {}


@pytest.mark.parametrize(("page", "line", "code"), _blocks("python"), ids=lambda v: str(v)[:40])
def test_every_python_block_runs(tmp_path, page, line, code):
    compile(code, f"{page}:{line}", "exec")
    if any(marker in code for marker in COMPILE_ONLY):
        return
    done = _run_python(code, tmp_path)
    assert done.returncode == 0, f"{page}:{line}\n{done.stderr}"


def test_the_compile_only_list_names_real_blocks():
    for marker, why in COMPILE_ONLY.items():
        assert why and any(marker in code for _, _, code in _blocks("python")), marker


def _agentdiag_commands() -> list[tuple[str, int, list[str]]]:
    """Every ``agentdiag ...`` command line of the shell blocks, as arguments (continuations joined, comments cut)."""
    commands = []
    for language in ("bash", "console", "sh"):
        for page, line, body in _blocks(language):
            for text in body.replace("\\\n", " ").splitlines():
                text = text.removeprefix("$ ")
                if "agentdiag" not in text:
                    continue
                words = shlex.split(text, comments=True)
                segment: list[str] = []
                for word in [*words, "&&"]:
                    if word in ("&&", "||", "|", ";"):
                        while segment and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", segment[0]):
                            segment.pop(0)  # VAR=value before the command
                        if segment[:1] == ["agentdiag"]:
                            commands.append((page, line, segment[1:]))
                        segment = []
                    else:
                        segment.append(word)
    return commands


def test_every_agentdiag_command_in_the_docs_exists_with_its_flags():
    commands = _agentdiag_commands()
    assert len(commands) > 15
    for page, line, arguments in commands:
        assert arguments, f"{page}:{line}: agentdiag without a command"
        command = cli.commands.get(arguments[0])
        assert isinstance(command, click.Command), f"{page}:{line}: no command agentdiag {arguments[0]}"
        flags = {option for param in command.params for option in (*param.opts, *param.secondary_opts)}
        flags |= {"--help", "-h"}
        options = {option: param for param in command.params for option in param.opts}
        for index, word in enumerate(arguments[1:], start=1):
            following = arguments[index + 1] if index + 1 < len(arguments) else None
            if word.startswith("-"):
                flag = word.split("=", 1)[0]
                assert flag in flags, f"{page}:{line}: agentdiag {arguments[0]} has no {flag}"
                choices = getattr(options.get(flag), "type", None)
                if isinstance(choices, click.Choice) and following is not None:
                    assert following in choices.choices, f"{page}:{line}: {flag} {following} is not a choice"


def test_every_agentdiag_command_quoted_in_the_prose_exists_with_its_flags():
    """The inline `agentdiag COMMAND --flag ...` of the tables and text, as the shell blocks are checked above."""
    quoted = 0
    for name, text in PAGES.items():
        prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
        for span in re.findall(r"`agentdiag ([^`]+)`", prose):
            command_name = span.split()[0]
            if command_name.isupper():  # a placeholder: `agentdiag COMMAND --help`
                continue
            command = cli if command_name.startswith("-") else cli.commands.get(command_name)  # `agentdiag --version`
            assert isinstance(command, click.Command), f"{name}: no command agentdiag {command_name}"
            flags = {option for param in command.params for option in (*param.opts, *param.secondary_opts)}
            for flag in re.findall(r"(?<![\w-])--[a-z][a-z-]*", span):
                assert flag in flags | {"--help"}, f"{name}: agentdiag {command_name} has no {flag}"
            quoted += 1
    assert quoted > 30


def _slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M)
    return {_slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, re.M)}


def test_every_relative_link_points_to_an_existing_file_and_heading():
    checked = 0
    for name, text in PAGES.items():
        base = (ROOT / name).parent
        prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
        for target in re.findall(r"\]\(([^)\s]+)\)", prose):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            file = (base / path).resolve() if path else ROOT / name
            assert file.exists(), f"{name}: link to a missing file {target}"
            if anchor and file.suffix == ".md":
                assert anchor in _anchors(file), f"{name}: link to a missing heading {target}"
            checked += 1
    assert checked > 30


def test_the_pipeline_picture_is_the_one_the_script_draws():
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_pipeline_svg", DOCS / "make_pipeline_svg.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    drawn = (DOCS / "pipeline.svg").read_text(encoding="utf-8")
    assert drawn == module.svg(), "docs/pipeline.svg is stale: python docs/make_pipeline_svg.py"
    assert "](docs/pipeline.svg)" in README
    # Self-contained: no external font, image, stylesheet or link.
    assert "@import" not in drawn and "href" not in drawn.replace('marker-end="url(#head)"', "")
    assert re.findall(r"https?://[^\s\"]+", drawn) == ["http://www.w3.org/2000/svg"]
    for step in (
        "instrumentation",
        "TracerProvider",
        "SessionSequencer",
        "RedactingSpanProcessor",
        "local policy",
        "strict policy",
        "batching",
        "SQLiteSpanExporter",
        ".agentdiag/traces.db",
        "agentdiag CLI",
        "OTLP exporter",
        "Collector",
        "Jaeger / Tempo",
    ):
        assert step in drawn, step


@pytest.mark.parametrize(
    ("example", "module", "install"),
    [
        ("openai_agents_weather.py", "agents", "pip install -e '.[openai-agents]'"),
        ("langgraph_react.py", "langchain", "pip install -e '.[langchain]' 'langchain>=1.0'"),
    ],
)
def test_an_example_without_its_framework_names_the_install_line_and_exits_2(tmp_path, example, module, install):
    code = (
        f"import sys, runpy; sys.modules[{module!r}] = None; "
        f"runpy.run_path({str(ROOT / 'examples' / example)!r}, run_name='__main__')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.endswith(install)
    assert f"`{install}`" in PAGES["docs/integrations.md"]  # the docs name the same line


def test_the_manual_example_needs_no_extra(tmp_path):
    missing = ("agents", "openai", "anthropic", "langchain", "langchain_core", "langgraph")
    code = (
        f"import sys, runpy; sys.modules.update(dict.fromkeys({missing!r})); "
        f"runpy.run_path({str(ROOT / 'examples' / 'manual_agent.py')!r}, run_name='__main__')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "gato means cat" in done.stdout
