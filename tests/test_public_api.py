"""The supported API (docs/api.md): every module its table lists imports and offers the names it says."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"


def _table() -> list[tuple[str, str]]:
    text = DOC.read_text(encoding="utf-8")
    start = text.index("<!-- supported modules")
    end = text.index("<!-- end of supported modules -->")
    rows = re.findall(r"^\| `([a-z_.]+)` \| (.+) \|$", text[start:end], flags=re.MULTILINE)
    assert rows, "docs/api.md lists no module"
    return rows


ROWS = _table()


@pytest.mark.parametrize(("module", "names"), ROWS, ids=[module for module, _ in ROWS])
def test_each_supported_module_offers_what_the_table_says(module: str, names: str) -> None:
    mod = importlib.import_module(module)
    if names.startswith("its `__all__`"):
        exported = getattr(mod, "__all__", None)
        assert exported, f"{module} has no __all__"
        for name in exported:
            assert getattr(mod, name) is not None, f"{module}.{name}"
        # The names the row spells out are part of the promise too.
        for name in re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", names.partition(":")[2]):
            assert name in exported, f"{module}: {name} is in docs/api.md, not in __all__"
    elif names.startswith("every upper-case name"):
        assert [name for name in vars(mod) if name.isupper() and not name.startswith("_")], module
    else:
        for name in re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", names):
            assert hasattr(mod, name), f"{module}.{name}"


def test_every_instrumentor_package_is_listed() -> None:
    """A new integration is supported the day it lands, or it is said not to be."""
    root = Path(importlib.import_module("otel_agentdiag.instrumentation").__file__).parent
    packages = {f"otel_agentdiag.instrumentation.{p.name}" for p in root.iterdir() if (p / "__init__.py").exists()}
    assert packages <= {module for module, _ in ROWS}
