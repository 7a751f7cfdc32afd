"""A real server and a real browser for the viewer tests: uvicorn on 127.0.0.1 in a thread, headless Chromium."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from otel_agentdiag.serve import ServeSettings
from otel_agentdiag.serve.server import running

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def chromium_path() -> str | None:
    """Debian's ``chromium`` (``.ci/run`` installs it), never a browser Playwright downloads."""
    for candidate in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser")):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


@contextmanager
def serving(store: Path, tab: Any) -> Iterator[str]:
    """``agentdiag serve``'s application over ``store`` on a free loopback port, its token already exchanged for
    the cookie in ``tab``'s browser context as its owner does it (opening the URL with ``?token=``, which leaves
    the address bar); yields its base URL."""
    settings = ServeSettings(store_path=store, port=0)
    with running(settings) as url:
        tab.goto(f"{url}/?token={settings.token}")
        assert tab.url == f"{url}/", "the token left the address bar"
        yield url


@dataclass
class Console:
    """A page's console errors and uncaught exceptions."""

    errors: list[str] = field(default_factory=list)

    def watch(self, page: Any) -> None:
        page.on("console", lambda m: self.errors.append(f"console: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
