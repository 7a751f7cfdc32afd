"""The web viewer for agent runs: its pages, static assets and the JSON they read."""

from __future__ import annotations

from starlette.routing import BaseRoute


def routes() -> list[BaseRoute]:
    return []
