"""Package attributes imported on first use (PEP 562), so importing a package costs only what its caller uses."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def lazy_attributes(
    package: str, names: Mapping[str, str], namespace: dict[str, Any], public: Iterable[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__``.

    ``names`` maps each public name to the module that defines it; the value is imported on its first look-up and
    kept in ``namespace`` (the package's ``globals()``), so the next look-up is a plain attribute. A submodule read
    as an attribute (``package.config``) is imported, as an eager package that imported it allowed.
    """
    listed = frozenset(public)

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = names.get(name)
        if module is None:
            try:
                return importlib.import_module(f"{package}.{name}")
            except ModuleNotFoundError as exc:
                if exc.name != f"{package}.{name}":
                    raise
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | listed)

    return __getattr__, __dir__
