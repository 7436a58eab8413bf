"""The HTML report's picture of a `compilediag run` step: each rank's step as one stacked bar
of its parts (forward, backward, optimizer, data, evaluation where every step held one,
the rest), over the same steps as the numbers beside it; under each, the time its
collectives ran, measured over the kernel profile's steps (a wait for the other ranks in
it) and drawn as the same share of the window's step (the profiler stretches its steps: a
bar of their milliseconds would run past the step's); each evaluation on a row of its
own. One scale for the steps: one-off work (an evaluation, a checkpoint) longer than the
longest step is drawn cut at the whole width, its time written beside it (#68: before, a
one-off 4.37 s evaluation set the scale, and every step bar was a sliver). Inline SVG: no
script, no network."""

from __future__ import annotations

from markupsafe import Markup, escape

from compilediag.render import ms
from compilediag.render.views import RANKS_SHOWN
from compilediag.report.model import Breakdown, Report

LABEL, WIDTH, ROW, BAR, WAIT = 150, 560, 30, 16, 6  # px
COLOURS = {
    "forward": "#2b6cb0", "backward": "#805ad5", "optimizer": "#d69e2e", "data": "#38a169",
    "evaluation": "#dd6b20", "checkpoint": "#975a16", "the rest": "#718096",
    "collectives": "#e53e3e",
}  # fmt: skip


def rows_of(report: Report) -> list[tuple[str, Breakdown | None, float]]:
    """(label, a rank's step, or None with the ms of other work, its kind the label's first
    word): the window's rank first, the others as the table orders them (the one the others
    wait for first), then each evaluation and checkpoint."""
    r, t = report.runtime, report.timings
    if r is None or t is None or t.breakdown is None:
        return []
    first = "a step" if r.window_rank is None else f"rank {r.window_rank}"
    rows: list[tuple[str, Breakdown | None, float]] = [(first, t.breakdown, 0.0)]
    others = [s for s in r.rank_steps if s.rank != r.window_rank]
    others.sort(key=lambda s: s.breakdown.communication_ms or 0.0)
    rows += [(f"rank {s.rank}", s.breakdown, 0.0) for s in others[:RANKS_SHOWN]]
    for w in r.other_work:
        who = f", rank {', '.join(map(str, w.ranks))}" if w.ranks else ""
        rows.append((f"{w.kind}{who}", None, w.ms))
    return rows


def step_picture(report: Report) -> Markup:
    """The SVG; '' where the report has no measured step."""
    rows = rows_of(report)
    if not rows:
        return Markup("")
    r = report.runtime
    assert r is not None
    kernel_step = {f"rank {s.rank}": s.kernel_step_ms for s in r.rank_steps}
    kernel_step.setdefault(rows[0][0], r.kernel_step_ms)

    def collectives(label: str, b: Breakdown) -> float:
        """Its collectives as the same share of the window's step as of the kernel
        profile's step they were measured over."""
        basis = kernel_step.get(label) or r.kernel_step_ms
        share = (b.communication_ms or 0.0) / basis if basis else 0.0
        return min(1.0, share) * b.call_ms if basis else (b.communication_ms or 0.0)

    scale = max(max(b.call_ms, collectives(label, b)) for label, b, _ in rows if b is not None)
    if scale <= 0:
        return Markup("")
    px = WIDTH / scale
    out = []
    for i, (label, b, other) in enumerate(rows):
        y = i * ROW
        out.append(f'<text x="0" y="{y + 12}" class="row-name">{escape(label)}</text>')
        parts = b.parts() if b is not None else [(label.split(",")[0], other)]
        x = float(LABEL)
        for name, value in parts:
            if value <= 0:
                continue
            w = min(value * px, WIDTH)
            out.append(_rect(label, name, value, x, y, w, BAR))
            x += w
        if b is None and other > scale:  # one-off work past the steps' scale: cut, said
            out.append(
                f'<text x="{LABEL + WIDTH - 4}" y="{y + 12}" class="cut" text-anchor="end" '
                f'fill="#fff">{escape(ms(other))} ⫽ cut: not to scale</text>'
            )
        if b is not None and b.communication_ms:
            out.append(_rect(label, "collectives", b.communication_ms, LABEL, y + BAR + 1,
                             collectives(label, b) * px, WAIT))  # fmt: skip
    height = len(rows) * ROW
    shown = list(dict.fromkeys(part for part in _parts_drawn(out)))
    legend = " · ".join(f'<tspan fill="{COLOURS[n]}">■</tspan> {escape(n)}' for n in shown)
    note = f"the whole width: {ms(scale)}, the longest step"
    if "collectives" in shown:
        note = (
            "collectives: their share of the kernel profile's steps, drawn as that share of "
            "the step, beside the parts · " + note
        )
    return Markup(
        f'<svg class="steps" xmlns="http://www.w3.org/2000/svg" width="{LABEL + WIDTH}" '
        f'height="{height + 34}" data-scale-ms="{scale:.6f}" data-px="{WIDTH}" role="img" '
        f'aria-label="each rank\'s step in parts">{"".join(out)}'
        f'<text x="0" y="{height + 12}" class="legend">{legend}</text>'
        f'<text x="0" y="{height + 28}" class="legend">{escape(note)}</text></svg>'
    )


def _parts_drawn(rects: list[str]) -> list[str]:
    """The parts the bars show, in the order of COLOURS."""
    drawn = " ".join(rects)
    return [n for n in COLOURS if f'data-part="{n}"' in drawn]


def _rect(row: str, part: str, value: float, x: float, y: float, w: float, h: int) -> str:
    return (
        f'<rect data-row="{escape(row)}" data-part="{escape(part)}" data-ms="{value:.6f}" '
        f'x="{x:.3f}" y="{y}" width="{w:.3f}" height="{h}" fill="{COLOURS.get(part, "#999")}">'
        f"<title>{escape(row)}: {escape(part)} {escape(ms(value))}</title></rect>"
    )
