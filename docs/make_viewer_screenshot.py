"""Re-make docs/viewer.png: the viewer (``agentdiag serve``) on a fresh demo store, in headless Chromium.

    python docs/make_viewer_screenshot.py [--chromium /usr/bin/chromium] [--out docs/viewer.png]

Needs the ``serve`` extra and Playwright (the ``dev`` extra), and Debian's ``chromium`` (never a downloaded
browser). Writes the demo store in a temporary folder; opens the demo run with its failing tool call selected.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from otel_agentdiag.serve import ServeSettings
from otel_agentdiag.serve.server import running

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
        settings = ServeSettings(store_path=store, port=0)
        with running(settings) as url, sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=options.chromium, args=ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 900}, color_scheme="light")
            page.goto(f"{url}/?token={settings.token}")  # as the owner opens the printed URL: then a cookie
            page.locator("#runs tbody tr").first.click()
            page.locator(".wf-row.err").first.click()
            page.locator("#span-details .error-type").wait_for()
            page.screenshot(path=str(options.out))
            browser.close()
    print(f"wrote {options.out}")


if __name__ == "__main__":
    main()
