"""Re-make docs/viewer.png: the viewer (``agentdiag serve``) on a fresh demo store, in headless Chromium.

    python docs/make_viewer_screenshot.py [--chromium /usr/bin/chromium] [--out docs/viewer.png]

Needs the ``serve`` extra and Playwright (the ``dev`` extra), and Debian's ``chromium`` (never a downloaded
browser). Writes the demo store in a temporary folder; opens the demo run with its failing tool call selected.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import uvicorn
from playwright.sync_api import sync_playwright

from otel_agentdiag.serve import ServeSettings, create_app

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "viewer.png")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        store = Path(folder) / "traces.db"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTDIAG_", "OTEL_"))}
        cmd = [sys.executable, "-m", "otel_agentdiag", "demo", "--store", str(store)]
        subprocess.run(cmd, cwd=folder, env=env, check=True, capture_output=True)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        app = create_app(ServeSettings(store_path=store, port=port))
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 20
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.01)
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=options.chromium, args=ARGS)
                page = browser.new_page(viewport={"width": 1400, "height": 900}, color_scheme="light")
                page.goto(f"http://127.0.0.1:{port}/")
                page.locator("#runs tbody tr").first.click()
                page.locator(".wf-row.err").first.click()
                page.locator("#span-details .error-type").wait_for()
                page.screenshot(path=str(options.out))
                browser.close()
        finally:
            server.should_exit = True
            thread.join(timeout=20)
    print(f"wrote {options.out}")


if __name__ == "__main__":
    main()
