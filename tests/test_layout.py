"""The house rules of the package's layout: no import circle, no module over the line limit, a one-line job each.

These are checked on the source, not by importing it: an import inside a function counts as an edge too, because
a circle that is only closed at run time is still a circle a newcomer has to hold in their head.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "otel_agentdiag"
ROOT = PACKAGE.name

#: "No module over about 500 lines" (issue 21). Raise it only with a reason written here.
MAX_LINES = 500


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _owning_module(dotted: str) -> str | None:
    """The module of ours that ``dotted`` (a module, or a name inside one) resolves to."""
    while dotted and dotted not in MODULES:
        dotted = dotted.rpartition(".")[0]
    return dotted or None


def _imports(name: str, path: Path) -> set[str]:
    """Every module of ours that ``name`` imports, at any depth of its code (functions and TYPE_CHECKING too)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            # ``from pkg import sub`` imports the submodule ``pkg.sub`` when there is one.
            targets = [f"{module}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            if target == ROOT or target.startswith(ROOT + "."):
                owner = _owning_module(target)
                if owner is not None and owner != name:
                    found.add(owner)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(graph[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, pending = work[-1]
            if pending:
                child = pending.pop()
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, sorted(graph[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


def test_the_cycle_finder_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_import_reader_sees_imports_inside_functions(tmp_path):
    module = tmp_path / "mod.py"
    module.write_text("def f():\n    from otel_agentdiag.storage import store\n    return store\n")
    assert _imports("otel_agentdiag.something", module) == {"otel_agentdiag.storage.store"}


def test_no_import_circle_inside_the_package():
    graph = {name: _imports(name, path) for name, path in MODULES.items()}
    assert _cycles(graph) == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_is_over_the_line_limit(name):
    lines = MODULES[name].read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"{name} has {lines} lines; split it by concept"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_module_opens_with_one_line_that_says_its_job(name):
    docstring = ast.get_docstring(ast.parse(MODULES[name].read_text(encoding="utf-8")), clean=False)
    assert docstring, f"{name} has no module docstring"
    lines = docstring.strip("\n").splitlines()
    summary = lines[0].strip()
    assert summary.endswith((".", "?")), f"{name}: the first line is not one sentence: {summary!r}"
    assert len(lines) == 1 or not lines[1].strip(), f"{name}: the summary runs onto a second line"


# --- docs/layout.md: the module map, generated from the docstrings above ------------------------------------
LAYOUT_DOC = PACKAGE.parent / "docs" / "layout.md"
BEGIN = "<!-- module map: generated by `python tests/test_layout.py --write`; do not edit by hand -->"
END = "<!-- end of module map -->"


def module_map() -> str:
    """Every module under its package, with the first line of its docstring (its one job)."""
    by_package: dict[str, list[tuple[str, str]]] = {}
    for name, path in MODULES.items():
        docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        shown = "`__init__.py`" if path.name == "__init__.py" else f"`{path.name}`"
        by_package.setdefault(package, []).append((shown, docstring.splitlines()[0].replace("|", "\\|")))
    out = [BEGIN, ""]
    for package in sorted(by_package):
        folder = package.replace(".", "/") + "/"
        out += [f"**`{folder}`**", "", "| module | its job |", "|---|---|"]
        out += [f"| {shown} | {job} |" for shown, job in by_package[package]]
        out.append("")
    out.append(END)
    return "\n".join(out)


def _current_map() -> str:
    text = LAYOUT_DOC.read_text(encoding="utf-8")
    start, end = text.index(BEGIN), text.index(END) + len(END)
    return text[start:end]


def test_docs_layout_lists_every_module_with_its_job():
    assert _current_map() == module_map(), "docs/layout.md is stale: run `python tests/test_layout.py --write`"


if __name__ == "__main__":
    import sys

    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/test_layout.py --write   (rewrites the module map in docs/layout.md)")
    text = LAYOUT_DOC.read_text(encoding="utf-8")
    LAYOUT_DOC.write_text(text.replace(_current_map(), module_map()), encoding="utf-8")
    print(f"wrote the module map of {LAYOUT_DOC}")
