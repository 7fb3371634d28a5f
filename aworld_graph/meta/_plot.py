"""A self-contained SVG chart of score per iteration with cost (no plotting library needed)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

__all__ = ["Point", "curves_plot", "score_plot"]

W, H = 720, 380
LEFT, RIGHT, TOP, BOTTOM = 56, 64, 58, 52


@dataclass(kw_only=True)
class Point:
    """One candidate on the chart."""

    iteration: int
    """Where it goes on the x axis (0 = the seed)."""
    train: float | None
    """Its training score."""
    dev: float | None = None
    """Its dev score, if confirmed there."""
    accepted: bool = True
    """Accepted into the pool (filled dot) or rejected (hollow)."""
    label: str = ""
    """Tooltip text."""


def _x(i: float, last: int) -> float:
    return LEFT + (W - LEFT - RIGHT) * (i / max(1, last))


def _y(v: float, lo: float, hi: float) -> float:
    return TOP + (H - TOP - BOTTOM) * (1 - (v - lo) / ((hi - lo) or 1))


def score_plot(
    points: Sequence[Point],
    cost: Sequence[tuple[int, float]],
    *,
    title: str,
    cost_label: str = "LLM calls",
) -> str:
    """An SVG: training scores (dots), best-so-far (line), dev scores (squares) and the
    cumulative cost per iteration (grey line, right axis)."""
    last = max([p.iteration for p in points] + [i for i, _ in cost] + [1])
    values = [v for p in points for v in (p.train, p.dev) if v is not None]
    lo, hi = min([0.0, *values]), max([1.0, *values])
    top_cost = max([c for _, c in cost] + [1.0])
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{W}" height="{H}" fill="white"/>',
        f'<text x="{W / 2}" y="18" text-anchor="middle" font-size="14">{escape(title)}</text>',
    ]
    for k in range(6):  # left axis: score
        v = lo + (hi - lo) * k / 5
        y = _y(v, lo, hi)
        out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{W - RIGHT}" y2="{y:.1f}" stroke="#eee"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{v:.2f}</text>')
        c = top_cost * k / 5
        out.append(f'<text x="{W - RIGHT + 6}" y="{y + 4:.1f}" fill="#888">{c:.0f}</text>')
    step = max(1, last // 12)
    for i in range(0, last + 1, step):
        x = _x(i, last)
        out.append(f'<text x="{x:.1f}" y="{H - BOTTOM + 16}" text-anchor="middle">{i}</text>')
    out.append(
        f'<line x1="{LEFT}" y1="{H - BOTTOM}" x2="{W - RIGHT}" y2="{H - BOTTOM}" stroke="#333"/>'
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{H - BOTTOM}" stroke="#333"/>'
        f'<text x="{(LEFT + W - RIGHT) / 2}" y="{H - 12}" text-anchor="middle">iteration</text>'
        f'<text x="14" y="{(TOP + H - BOTTOM) / 2}" transform="rotate(-90 14 {(TOP + H - BOTTOM) / 2})" '
        'text-anchor="middle">mean reward</text>'
        f'<text x="{W - 8}" y="{(TOP + H - BOTTOM) / 2}" transform="rotate(90 {W - 8} {(TOP + H - BOTTOM) / 2})" '
        f'text-anchor="middle" fill="#888">cumulative {escape(cost_label)}</text>'
    )
    if cost:
        path = " ".join(
            f"{'M' if k == 0 else 'L'}{_x(i, last):.1f},{_y(c, 0.0, top_cost):.1f}"
            for k, (i, c) in enumerate(cost)
        )
        out.append(f'<path d="{path}" fill="none" stroke="#aaa" stroke-dasharray="4 3"/>')
    best: list[tuple[int, float]] = []
    for p in sorted(points, key=lambda p: p.iteration):
        if p.accepted and p.train is not None and (not best or p.train > best[-1][1]):
            best.append((p.iteration, p.train))
    if best:
        best.append((last, best[-1][1]))
        d = "M" + " L".join(
            f"{_x(i, last):.1f},{_y(v, lo, hi):.1f} {_x(best[k + 1][0], last):.1f},{_y(v, lo, hi):.1f}"
            for k, (i, v) in enumerate(best[:-1])
        )
        out.append(f'<path d="{d}" fill="none" stroke="#1f77b4" stroke-width="2"/>')
    for p in points:
        if p.train is not None:
            x, y = _x(p.iteration, last), _y(p.train, lo, hi)
            fill = "#1f77b4" if p.accepted else "white"
            out.append(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5" fill="{fill}" stroke="#1f77b4"><title>{escape(p.label)}</title></circle>'
            )
        if p.dev is not None:
            x, y = _x(p.iteration, last), _y(p.dev, lo, hi)
            out.append(
                f'<rect x="{x - 4:.1f}" y="{y - 4:.1f}" width="8" height="8" fill="#ff7f0e"><title>dev {p.dev:.3f}</title></rect>'
            )
    legend = [
        ("circle", "#1f77b4", "train (filled: accepted)"),
        ("line", "#1f77b4", "best train so far"),
        ("rect", "#ff7f0e", "dev (confirmed)"),
        ("dash", "#aaa", f"cumulative {cost_label}"),
    ]
    x0 = LEFT + 8
    for k, (kind, color, text) in enumerate(legend):
        x, y = x0 + k * 160, TOP - 18
        if kind == "circle":
            out.append(f'<circle cx="{x}" cy="{y - 4}" r="4" fill="{color}"/>')
        elif kind == "rect":
            out.append(f'<rect x="{x - 4}" y="{y - 8}" width="8" height="8" fill="{color}"/>')
        else:
            dash = ' stroke-dasharray="4 3"' if kind == "dash" else ""
            out.append(
                f'<line x1="{x - 8}" y1="{y - 4}" x2="{x + 6}" y2="{y - 4}" stroke="{color}" stroke-width="2"{dash}/>'
            )
        out.append(f'<text x="{x + 10}" y="{y}">{escape(text)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e")


def curves_plot(
    series: Sequence[tuple[str, Sequence[tuple[float, float]]]],
    *,
    title: str,
    x_label: str,
    y_label: str,
    marks: Sequence[tuple[str, float, float]] = (),
) -> str:
    """An SVG of step curves (one per ``(label, [(x, y), ...])``, held until the last x of any),
    with optional labelled marks ``(label, x, y)`` (drawn as diamonds in the series' color when
    the label starts with a series' label)."""
    xs = [x for _, pts in series for x, _ in pts] + [x for _, x, _ in marks] + [1.0]
    ys = [y for _, pts in series for _, y in pts] + [y for _, _, y in marks]
    top_x = max(xs)
    lo, hi = min([0.0, *ys]), max([1.0, *ys])

    def px(x: float) -> float:
        return LEFT + (W - LEFT - RIGHT) * (x / (top_x or 1))

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{W}" height="{H}" fill="white"/>',
        f'<text x="{W / 2}" y="18" text-anchor="middle" font-size="14">{escape(title)}</text>',
    ]
    for k in range(6):
        v = lo + (hi - lo) * k / 5
        y = _y(v, lo, hi)
        out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{W - RIGHT}" y2="{y:.1f}" stroke="#eee"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{v:.2f}</text>')
        x = top_x * k / 5
        out.append(
            f'<text x="{px(x):.1f}" y="{H - BOTTOM + 16}" text-anchor="middle">{x:.0f}</text>'
        )
    out.append(
        f'<line x1="{LEFT}" y1="{H - BOTTOM}" x2="{W - RIGHT}" y2="{H - BOTTOM}" stroke="#333"/>'
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{H - BOTTOM}" stroke="#333"/>'
        f'<text x="{(LEFT + W - RIGHT) / 2}" y="{H - 12}" text-anchor="middle">{escape(x_label)}</text>'
        f'<text x="14" y="{(TOP + H - BOTTOM) / 2}" transform="rotate(-90 14 {(TOP + H - BOTTOM) / 2})" '
        f'text-anchor="middle">{escape(y_label)}</text>'
    )
    for k, (label, pts) in enumerate(series):
        color = COLORS[k % len(COLORS)]
        if pts:
            held = [*pts, (top_x, pts[-1][1])]
            d = f"M{px(held[0][0]):.1f},{_y(held[0][1], lo, hi):.1f}"
            for (_, y0), (x1, y1) in zip(held, held[1:], strict=False):
                d += f" L{px(x1):.1f},{_y(y0, lo, hi):.1f} L{px(x1):.1f},{_y(y1, lo, hi):.1f}"
            out.append(f'<path d="{d}" fill="none" stroke="{color}" stroke-width="2"/>')
            for x, y in pts:
                out.append(
                    f'<circle cx="{px(x):.1f}" cy="{_y(y, lo, hi):.1f}" r="3" fill="{color}">'
                    f"<title>{escape(label)}: {y:.3f} at {x:.0f}</title></circle>"
                )
        lx, ly = LEFT + 8 + k * 220, TOP - 18
        out.append(
            f'<line x1="{lx - 8}" y1="{ly - 4}" x2="{lx + 6}" y2="{ly - 4}" stroke="{color}" '
            f'stroke-width="2"/><text x="{lx + 10}" y="{ly}">{escape(label)}</text>'
        )
    for label, x, y in marks:
        k = next((i for i, (s, _) in enumerate(series) if label.startswith(s)), 0)
        cx, cy = px(x), _y(y, lo, hi)
        out.append(
            f'<path d="M{cx:.1f},{cy - 6:.1f} L{cx + 6:.1f},{cy:.1f} L{cx:.1f},{cy + 6:.1f} '
            f'L{cx - 6:.1f},{cy:.1f} Z" fill="white" stroke="{COLORS[k % len(COLORS)]}" '
            f'stroke-width="2"><title>{escape(label)}: {y:.3f}</title></path>'
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"
