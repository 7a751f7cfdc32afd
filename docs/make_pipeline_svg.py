"""Draw docs/pipeline.svg, the README's picture of where a span goes: ``python docs/make_pipeline_svg.py``.

Plain SVG on a white background, generic font families only, no external reference; tests/test_docs.py checks
that the committed file equals what this script draws.
"""

from __future__ import annotations

import sys
from pathlib import Path
from xml.sax.saxutils import escape

WIDTH, HEIGHT = 1000, 362
BOX_W, BOX_H, GAP, LEFT = 170, 58, 22, 45
FILLS = {"common": "#eef5ea", "local": "#e6f0fb", "otlp": "#fdf0e1", "outside": "#ffffff"}
STROKES = {"common": "#5b8a4a", "local": "#3f6fa8", "otlp": "#b7792c", "outside": "#666666"}


def _box(x: float, y: float, w: float, title: str, sub: str, tone: str) -> list[str]:
    cx = x + w / 2
    return [
        f'<rect x="{x}" y="{y}" width="{w}" height="{BOX_H}" rx="6" fill="{FILLS[tone]}" '
        f'stroke="{STROKES[tone]}" stroke-width="1.5"/>',
        f'<text x="{cx}" y="{y + 24}" text-anchor="middle" font-size="13" font-weight="bold">{escape(title)}</text>',
        f'<text x="{cx}" y="{y + 42}" text-anchor="middle" font-size="11" fill="#444444">{escape(sub)}</text>',
    ]


def _arrow(points: list[tuple[float, float]]) -> str:
    path = " ".join(f"{'M' if i == 0 else 'L'} {x} {y}" for i, (x, y) in enumerate(points))
    return f'<path d="{path}" fill="none" stroke="#333333" stroke-width="1.5" marker-end="url(#head)"/>'


def _row(y: float, boxes: list[tuple[str, str, str]]) -> list[str]:
    out: list[str] = []
    for i, (title, sub, tone) in enumerate(boxes):
        x = LEFT + i * (BOX_W + GAP)
        out += _box(x, y, BOX_W, title, sub, tone)
        if i:
            out.append(_arrow([(x - GAP, y + BOX_H / 2), (x - 2, y + BOX_H / 2)]))
    return out


def svg() -> str:
    """The whole picture, as text."""
    top_y, local_y, otlp_y = 40, 160, 282
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" '
        'font-family="Helvetica, Arial, sans-serif" fill="#222222">',
        "<title>otel-agentdiag pipeline: a span from your code to the local store and to an OTLP collector</title>",
        '<defs><marker id="head" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#333333"/></marker></defs>',
        f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>',
        # Everything inside the dashed frame runs in the agent's process.
        f'<rect x="15" y="14" width="600" height="{otlp_y + BOX_H + 12 - 14}" rx="8" fill="none" stroke="#999999" '
        'stroke-dasharray="6 4"/>',
        '<text x="25" y="30" font-size="12" font-style="italic" fill="#555555">your process</text>',
    ]
    # The common part: user code, instrumentation, the provider with its sequencer.
    top = [
        (45, 150, "your agent code", "or its framework", "common"),
        (215, 180, "instrumentation", "agent_run, llm_call, tool_call…", "common"),
        (415, 190, "TracerProvider", "SessionSequencer numbers spans", "common"),
    ]
    for i, (x, w, title, sub, tone) in enumerate(top):
        out += _box(x, top_y, w, title, sub, tone)
        if i:
            previous_end = top[i - 1][0] + top[i - 1][1]
            out.append(_arrow([(previous_end, top_y + BOX_H / 2), (x - 2, top_y + BOX_H / 2)]))
    # The split: one branch per destination, each with its own policy, batching and exporter.
    split_y = top_y + BOX_H + 22
    provider_x = 415 + 190 / 2
    first_x = LEFT + BOX_W / 2
    out.append(
        f'<path d="M {provider_x} {top_y + BOX_H} L {provider_x} {split_y} L 30 {split_y}" fill="none" '
        'stroke="#333333" stroke-width="1.5"/>'
    )
    out.append(_arrow([(first_x, split_y), (first_x, local_y - 2)]))
    out.append(_arrow([(30, split_y), (30, otlp_y + BOX_H / 2), (LEFT - 2, otlp_y + BOX_H / 2)]))
    out.append(
        f'<text x="{first_x + 10}" y="{local_y - 10}" font-size="12" fill="{STROKES["local"]}">'
        "local branch (default)</text>"
    )
    out.append(
        f'<text x="{first_x + 10}" y="{otlp_y - 10}" font-size="12" fill="{STROKES["otlp"]}">'
        "OTLP branch (with an OTLP endpoint and the [otlp] extra)</text>"
    )
    out += _row(
        local_y,
        [
            ("batching", "counts every span's fate", "local"),
            ("RedactingSpanProcessor", "local policy, on the worker", "local"),
            ("SQLiteSpanExporter", "spans + ledger, one txn", "local"),
            (".agentdiag/traces.db", "SQLite file, mode 0600", "outside"),
            ("agentdiag CLI", "traces, show, receipt…", "outside"),
        ],
    )
    out += _row(
        otlp_y,
        [
            ("batching", "counts every span's fate", "otlp"),
            ("RedactingSpanProcessor", "strict policy, on the worker", "otlp"),
            ("OTLP exporter", "http/protobuf or gRPC", "otlp"),
            ("Collector", "redaction processor", "outside"),
            ("Jaeger / Tempo", "(Grafana)", "outside"),
        ],
    )
    note_x = 640
    for i, line in enumerate(
        [
            "Each branch redacts on its own batch worker,",
            "just before export: no exporter ever sees",
            "a span that did not pass that branch's policy.",
        ]
    ):
        out.append(f'<text x="{note_x}" y="{top_y + 16 + i * 16}" font-size="12" fill="#444444">{escape(line)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    target = Path(__file__).with_name("pipeline.svg")
    target.write_text(svg(), encoding="utf-8")
    sys.stdout.write(f"wrote {target}\n")
