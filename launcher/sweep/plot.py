"""A sweep as a page to look at (pure): the objective by trial and by each parameter, as SVG in
one self-contained HTML file (no script, no download). Each point's tooltip is its trial's row;
the best trial is marked, a stopped trial shows its last evaluated value hollow, a failed one a
cross on the axis.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import Any

WIDTH, HEIGHT = 560, 300
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 28, 44
TICKS = 5
COLORS = {"best": "#d62728", "Succeeded": "#1f77b4", "Stopped": "#7f7f7f", "Failed": "#7f7f7f"}


@dataclass(frozen=True)
class Point:
    x: Any  # a trial number, a parameter's value
    y: float | None  # None: failed or not yet reported (drawn on the axis)
    kind: str  # "best", "Succeeded", "Stopped" (its last evaluation), "Failed", or a live phase
    tip: str


def points_of(status, x_of) -> list[Point]:
    """One point per trial: its objective value, or a stopped or running trial's last evaluated
    one (hollow), or none (a failed trial)."""
    out = []
    for row in status.trials:
        value = row.value if row.value is not None else (row.latest[1] if row.latest else None)
        kind = "best" if row.best else row.phase
        values = ", ".join(f"{k}={v}" for k, v in row.values.items())
        said = f"{status.metric} {value:.4g}" if value is not None else (row.message or "no value")
        out.append(Point(x_of(row), value, kind, f"{row.cluster}: {values}; {row.phase}; {said}"))
    return out


def _scale(low: float, high: float, log: bool, start: float, end: float):
    """A function from [low, high] (log: on a log scale) to [start, end]."""
    if log:
        low, high = math.log10(low), math.log10(high)
    span = (high - low) or 1.0

    def to(value: float) -> float:
        v = math.log10(value) if log else value
        return start + (v - low) / span * (end - start)

    return to


def _ticks(low: float, high: float, log: bool) -> list[float]:
    if log:
        first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
        return [10.0**e for e in range(first, last + 1) if low <= 10.0**e <= high] or [low, high]
    if high == low:
        return [low]
    step = (high - low) / (TICKS - 1)
    return [low + i * step for i in range(TICKS)]


def _label(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def chart(title: str, x_name: str, y_name: str, points: list[Point], *, log_x: bool = False) -> str:
    """An SVG scatter of `points`; a categorical x (strings, booleans) gets one slot per value in
    first-seen order, a numeric x a linear or log axis."""
    numeric = all(isinstance(p.x, int | float) and not isinstance(p.x, bool) for p in points)
    log_x = log_x and numeric and all(p.x > 0 for p in points)
    plot_left, plot_right, plot_top, plot_bottom = LEFT, WIDTH - RIGHT, TOP, HEIGHT - BOTTOM
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" role="img">',
        f"<title>{html.escape(title)}</title>",
        f'<text x="{WIDTH / 2}" y="16" text-anchor="middle" font-weight="bold">{html.escape(title)}</text>',
        f'<line x1="{plot_left}" y1="{plot_bottom}" x2="{plot_right}" y2="{plot_bottom}" stroke="#333"/>',
        f'<line x1="{plot_left}" y1="{plot_top}" x2="{plot_left}" y2="{plot_bottom}" stroke="#333"/>',
        f'<text x="{(plot_left + plot_right) / 2}" y="{HEIGHT - 8}" text-anchor="middle">{html.escape(x_name)}</text>',
        f'<text x="14" y="{(plot_top + plot_bottom) / 2}" text-anchor="middle" '
        f'transform="rotate(-90 14 {(plot_top + plot_bottom) / 2})">{html.escape(y_name)}</text>',
    ]
    if numeric and points:
        xs = [float(p.x) for p in points]
        to_x = _scale(min(xs), max(xs), log_x, plot_left + 12, plot_right - 12)
        x_ticks = [(to_x(t), _label(t)) for t in _ticks(min(xs), max(xs), log_x)]
        place_x = {id(p): to_x(float(p.x)) for p in points}
    else:
        slots = list(dict.fromkeys(str(p.x) for p in points))
        step = (plot_right - plot_left) / (len(slots) or 1)
        at = {s: plot_left + step * (i + 0.5) for i, s in enumerate(slots)}
        x_ticks = [(at[s], s) for s in slots]
        place_x = {id(p): at[str(p.x)] for p in points}
    for x, text in x_ticks:
        parts.append(f'<line x1="{x:.1f}" y1="{plot_bottom}" x2="{x:.1f}" y2="{plot_bottom + 4}" stroke="#333"/>')
        parts.append(f'<text x="{x:.1f}" y="{plot_bottom + 16}" text-anchor="middle">{html.escape(text)}</text>')
    ys = [p.y for p in points if p.y is not None]
    if ys:
        to_y = _scale(min(ys), max(ys), False, plot_bottom - 12, plot_top + 8)
        for t in _ticks(min(ys), max(ys), False):
            y = to_y(t)
            parts.append(f'<line x1="{plot_left - 4}" y1="{y:.1f}" x2="{plot_left}" y2="{y:.1f}" stroke="#333"/>')
            parts.append(f'<text x="{plot_left - 6}" y="{y + 4:.1f}" text-anchor="end">{_label(t)}</text>')
    for p in points:
        x, tip = place_x[id(p)], f"<title>{html.escape(p.tip)}</title>"
        color = COLORS.get(p.kind, "#2ca02c")
        if p.y is None:  # failed, or nothing reported yet: a cross on the x axis
            y = plot_bottom
            parts.append(
                f'<path class="trial {p.kind}" d="M{x - 4:.1f},{y - 4} l8,8 m0,-8 l-8,8" stroke="{color}" '
                f'stroke-width="2">{tip}</path>'
            )
            continue
        y = to_y(p.y)
        radius, fill = (7, color) if p.kind == "best" else (4, "none" if p.kind == "Stopped" else color)
        parts.append(
            f'<circle class="trial {p.kind}" cx="{x:.1f}" cy="{y:.1f}" r="{radius}" fill="{fill}" '
            f'stroke="{color}" stroke-width="1.5">{tip}</circle>'
        )
    parts.append("</svg>")
    return "\n".join(parts)


def page(status, log_scales: dict[str, bool]) -> str:
    """The sweep's page: its line, the objective by trial, then by each parameter (on the log
    scale the parameter is drawn on when `log_scales` says so)."""
    direction = "lower is better" if status.direction == "minimize" else "higher is better"
    best = status.best
    said = "no best yet"
    if best is not None and best.value is not None:
        said = f"best {best.cluster}: {status.metric} {best.value:.4g}"
    charts = [chart(f"{status.metric} by trial", "trial", status.metric, points_of(status, lambda r: r.number))]
    for name in status.parameters:
        charts.append(
            chart(
                f"{status.metric} by {name}",
                name,
                status.metric,
                points_of(status, lambda r, name=name: r.values.get(name)),
                log_x=log_scales.get(name, False),
            )
        )
    legend = (
        "filled: finished; large red: the best; hollow: stopped early (its last evaluation); "
        "a cross on the axis: failed or nothing reported; hover a point for its trial"
    )
    return "\n".join(
        [
            "<!doctype html>",
            '<html><head><meta charset="utf-8">',
            f"<title>sweep {html.escape(status.name)}</title>",
            "<style>body{font-family:sans-serif;font-size:12px} svg{margin:8px;border:1px solid #ddd}</style>",
            "</head><body>",
            f"<h1>sweep {html.escape(status.name)}: {html.escape(status.phase)}</h1>",
            f"<p>{html.escape(status.metric)} ({direction}); {html.escape(said)}; {len(status.trials)} trials. "
            f"{html.escape(legend)}.</p>",
            *charts,
            "</body></html>",
            "",
        ]
    )


def log_scales(sweep) -> dict[str, bool]:
    """Which parameters the search draws on a log scale (drawn so too)."""
    return {p.name: bool((p.int or p.float) and (p.int or p.float).log) for p in sweep.parameters}
