"""Rendering: one Jinja2 environment with autoescape on for every template, the filters
the templates use, and the shapes of the server-rendered SVG (progress bars, the cost
chart).

Everything a user or a model wrote — record text, answers, error messages, reasons,
arguments — reaches a page only through ``{{ … }}`` in these templates, so it is escaped;
no template marks anything ``|safe``, and no page has an inline script or style (the CSP
forbids both), so geometry is SVG attributes, never ``style=``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader

__all__ = ["bars", "cost_chart", "environment", "render"]

_TEMPLATES = Path(__file__).parent / "templates"
_ENV: Environment | None = None
SERIES_COLOURS = 8


def environment() -> Environment:
    global _ENV
    if _ENV is None:
        env = Environment(
            loader=FileSystemLoader(_TEMPLATES),
            autoescape=True,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        env.filters.update(
            when=when, money=money, pretty=pretty, ago=ago, count=count, cell=cell, rate=rate
        )
        env.globals.update(bars=bars, cost_chart=cost_chart)
        _ENV = env
    return _ENV


def render(name: str, **context: Any) -> str:
    return environment().get_template(name).render(**context)


def render_block(name: str, block: str, **context: Any) -> str:
    """One block of a template (a live fragment), rendered with the template's context."""
    template = environment().get_template(name)
    ctx = template.new_context(context)
    return "".join(template.blocks[block](ctx))


# -- filters -----------------------------------------------------------------------------------


def when(at: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at)) + " UTC" if at else "—"


def ago(at: float | None, now: float | None = None) -> str:
    if not at:
        return "—"
    s = max((now or time.time()) - at, 0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{int(s // size)}{unit} ago"
    return f"{int(s)}s ago"


def money(usd: float | None) -> str:
    usd = float(usd or 0.0)
    return f"${usd:,.2f}" if usd >= 1 or usd == 0 else f"${usd:.4f}"


def count(n: int | None) -> str:
    return f"{int(n or 0):,}"


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def cell(value: Any, limit: int = 160) -> str:
    """A table cell of an answer's field: text as it is, anything else as compact JSON,
    empty for a missing value, cut at ``limit`` characters (the record page has it whole)."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def rate(value: float | None) -> str:
    """A share as a percentage (``—`` when there is nothing to divide)."""
    return "—" if value is None else f"{100 * float(value):.1f} %"


# -- SVG shapes ---------------------------------------------------------------------------------


def bars(counts: dict[str, Any], total: int | None = None) -> list[dict[str, Any]]:
    """Segments of a 100-wide progress bar: answered, failed, skipped (in that order), as
    ``x``/``width`` in the bar's own units, with their counts."""
    parts = [(k, int(counts.get(k) or 0)) for k in ("answered", "failed", "skipped")]
    settled = sum(n for _, n in parts)
    whole = max(int(total or 0), settled, 1)
    out, x = [], 0.0
    for kind, n in parts:
        width = 100.0 * n / whole
        if n:
            out.append({"kind": kind, "n": n, "x": round(x, 3), "width": round(width, 3)})
        x += width
    return out


def cost_chart(data: dict[str, Any], *, width: int = 760, height: int = 260) -> dict[str, Any]:
    """A stacked bar per day of ``cost_over_time``'s series: rectangles with their series'
    colour class, axis ticks, and the legend. Pure geometry; the template draws it."""
    days: list[float] = data["days"]
    series: list[dict[str, Any]] = data["series"]
    left, bottom, top = 64, 28, 12
    plot_w, plot_h = width - left - 8, height - bottom - top
    totals = [sum(s["cost"][i] for s in series) for i in range(len(days))]
    peak = max(totals) if totals and max(totals) > 0 else 1.0
    step = plot_w / max(len(days), 1)
    rects = []
    for i, day in enumerate(days):
        y = top + plot_h
        for n, s in enumerate(series):
            c = s["cost"][i]
            if c <= 0:
                continue
            h = plot_h * c / peak
            y -= h
            rects.append(
                {
                    "x": round(left + i * step + 1, 2),
                    "y": round(y, 2),
                    "w": round(max(step - 2, 1), 2),
                    "h": round(max(h, 0.5), 2),
                    "cls": f"s{n % SERIES_COLOURS}",
                    "title": f"{time.strftime('%Y-%m-%d', time.gmtime(day))} "
                    f"{s['workflow']} {s['model']}: {money(c)}",
                }
            )
    ticks = [
        {"y": round(top + plot_h - plot_h * f, 2), "label": money(peak * f)}
        for f in (0.0, 0.5, 1.0)
    ]
    labels = [
        {
            "x": round(left + i * step + step / 2, 2),
            "label": time.strftime("%m-%d", time.gmtime(day)),
        }
        for i, day in enumerate(days)
        if i % max(len(days) // 6, 1) == 0
    ]
    legend = [
        {
            "cls": f"s{n % SERIES_COLOURS}",
            "workflow": s["workflow"],
            "model": s["model"],
            "total": s["total"],
            "calls": s["calls"],
        }
        for n, s in enumerate(series)
    ]
    return {
        "width": width,
        "height": height,
        "left": left,
        "top": top,
        "plot_w": plot_w,
        "plot_h": plot_h,
        "rects": rects,
        "ticks": ticks,
        "labels": labels,
        "legend": legend,
        "axis_y": top + plot_h,
    }
