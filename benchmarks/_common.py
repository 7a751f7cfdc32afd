"""What every benchmark's ``main()`` does with its results: the versions that produced them, then the JSON file."""

from __future__ import annotations

import json
import platform
import sqlite3
import sys
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
