"""A real server and a real browser for the viewer tests: uvicorn on 127.0.0.1 in a thread, headless Chromium."""

from __future__ import annotations

import shutil
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn

from otel_agentdiag.serve import ServeSettings, create_app

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
START_DEADLINE_S = 20.0


def chromium_path() -> str | None:
    """Debian's ``chromium`` (``.ci/run`` installs it), never a browser Playwright downloads."""
    for candidate in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser")):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def serving(store: Path) -> Iterator[str]:
    """``agentdiag serve``'s application over ``store`` on a free loopback port; yields its base URL."""
    port = _free_port()
    app = create_app(ServeSettings(store_path=store, port=port))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, name="viewer-test-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + START_DEADLINE_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)  # polling a flag uvicorn sets, with a deadline
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=START_DEADLINE_S)


@dataclass
class Console:
    """A page's console errors and uncaught exceptions."""

    errors: list[str] = field(default_factory=list)

    def watch(self, page: Any) -> None:
        page.on("console", lambda m: self.errors.append(f"console: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
