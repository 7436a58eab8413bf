"""The remedies tried, in words, as every renderer shows them: `run --try-fixes`' runs
(each remedy's effect with its interval, the one baseline) and a compile remedy's compile
cold and warm (explain's --try-fixes)."""

from __future__ import annotations

from compilediag.paths import where
from compilediag.render import ms, seconds
from compilediag.report.model import Tried, TryBaseline, VerifiedFix


def tried_words(t: Tried) -> str:
    """`fused: AdamW(..., fused=True) at train.py:52 (it can shorten the optimizer: at most 47%
    of the step): the step 26 ms → 15.5 ms, optimizer 19.8 ms → 9.89 ms; losses match exactly
    over 8 steps: kept: 1.67× faster [1.58-1.77×] over 3 pairs of runs`"""
    file, _, line = t.where.rpartition(":")
    at = f" at {where(file, int(line))}" if file and line.isdigit() else ""
    name = "all kept, together" if len(t.remedies) > 1 else t.remedy
    figures = []
    if t.step_ms is not None and t.step_ms_after is not None:
        step = f"the step {ms(t.step_ms)} → {ms(t.step_ms_after)}"
        gain = t.step_ms - t.step_ms_after
        if t.part and t.part_ms is not None and gain > t.part_ms:
            # (a look read "at most 23% of the step" beside a step 30% shorter, unremarked)
            step += f" (more than the {t.part}'s whole {ms(t.part_ms)}: the runs' spread too)"
        figures.append(step)
    if t.part and t.part_ms is not None and t.part_ms_after is not None:
        figures.append(f"{t.part} {ms(t.part_ms)} → {ms(t.part_ms_after)}")
    if t.graph_breaks != t.graph_breaks_after:
        figures.append(f"graph breaks {t.graph_breaks} → {t.graph_breaks_after}")
    measured = ", ".join(figures) + (f"; {t.losses}" if t.losses else "")
    expected = f" (it {t.expected})" if t.expected else ""
    text = f"{name}: {t.code}{at}{expected}: " + (f"{measured}: {t.why}" if measured else t.why)
    if t.hint:
        text += f"; torch's hint: {t.hint}"
    return text + (f"; {t.settling}" if t.settling else "")


def cold_warm_words(fx: VerifiedFix) -> str:
    """A compile remedy's compile, cold and warm: `compile with empty caches 13.6 s → 2.01 s,
    warm 2.62 s → 1.51 s: the gain is in the cold compile (a new machine, a CI runner)`;
    "" where not measured."""
    b, a = fx.before, fx.after
    if a is None or None in (
        b.compile_s_cold,
        a.compile_s_cold,
        b.compile_s_warm,
        a.compile_s_warm,
    ):
        return ""
    cold = (b.compile_s_cold or 0.0) - (a.compile_s_cold or 0.0)
    warm = (b.compile_s_warm or 0.0) - (a.compile_s_warm or 0.0)
    where = (
        "the gain is in the cold compile (a new machine, a CI runner)" if cold > warm
        else "the gain is in the warm compile (a run after one that filled the caches)"
    )  # fmt: skip
    return (
        f"compile with empty caches {seconds(b.compile_s_cold or 0.0)} → "
        f"{seconds(a.compile_s_cold or 0.0)}, warm {seconds(b.compile_s_warm or 0.0)} → "
        f"{seconds(a.compile_s_warm or 0.0)}: {where}"
    )


def _spread(spread: float) -> str:
    """How far the runs' steps spread ((max - min) / median): a share where it is one, else
    in median steps (a look read "within 3045% of each other")."""
    if spread <= 0.5:
        return f"within {spread:.0%} of each other"
    # ("the slowest and the fastest 0.972× the median step apart" read as hard to parse)
    return f"the slowest run's step less the fastest's: {spread:.2g}× the median run's"


def try_baseline_words(b: TryBaseline) -> str:
    """`the job as it is, run 4 times more alternated with the remedies: 43.7 ms a step by
    their windows (within 6% of each other)`, and what ran beside them: these runs' step,
    each remedy's baseline, not the window's above."""
    text = (
        f"the job as it is, run once more alternated with the remedies: {ms(b.step_ms)} a "
        "step by its window"
        if b.runs == 1
        else f"the job as it is, run {b.runs} times more alternated with the remedies: "
        f"{ms(b.step_ms)} a step, their windows' geometric mean ({_spread(b.spread)}); each "
        "remedy is set against the runs of its own rounds"
    )  # (one run: no spread to give; a remedy decided early has fewer rounds, its own step)
    return "; ".join(x for x in (text, b.load, b.stopped, b.resolution) if x)
