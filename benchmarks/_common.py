"""What every benchmark's ``main()`` does with its results: the versions that produced them, then the JSON file."""

from __future__ import annotations

import argparse
import json
import platform
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from otel_agentdiag import __version__


def save_results(results: dict[str, Any], output: Path) -> None:
    """Add ``python``, ``sqlite``, ``otel_agentdiag`` and ``machine`` (unless set) and write ``output`` as JSON."""
    results.setdefault("python", sys.version.split()[0])
    results.setdefault("sqlite", sqlite3.sqlite_version)
    results.setdefault("otel_agentdiag", __version__)
    results.setdefault("machine", platform.machine())
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(results, indent=2, allow_nan=False) + "\n")


def benchmark_main(
    argv: list[str] | None,
    *,
    description: str,
    default_output: str,
    run: Callable[..., Any],
    print_report: Callable[[Any], None],
) -> int:
    """What a benchmark module's ``main()`` does: ``--quick`` and ``--output``, run, print, save."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="few runs (a smoke test; noisy figures)")
    parser.add_argument("--output", type=Path, default=Path(default_output))
    arguments = parser.parse_args(argv)
    results = run(quick=arguments.quick)
    print_report(results)
    save_results(results, arguments.output)
    return 0
