"""What the compiled entry's calls ran, from the probe's tally of them
(`ProcessRuntime.entry_calls`). The recompile limit, call by call (#67): for a frame that
hit it and is the compiled entry's own, which of the entry's later calls ran a graph torch
had and which ran in eager mode, their shapes and what each took per unit of work, and the
torch.compile call that set it up. And whether the window's steps did the work of the
steps timed around it (their shapes)."""

from __future__ import annotations

import re
import statistics

from compilediag.analysis.source import code_at
from compilediag.analysis.step.other_work import training_profile
from compilediag.harness.worker_types import ProcessRuntime
from compilediag.report.compile import LimitHit

FRAME = re.compile(r"(\d+)/\d+$")  # a compile id's frame (`0/8`, `r1:0/8`)
WORK_STEPS = 3  # steps of shapes both sides ran, on each side: the window's cost compared


def limit_calls(hits: list[LimitHit], p: ProcessRuntime) -> list[int]:
    """Each hit of `p`'s first frame (the one its first compiled entry runs), told call by
    call; every hit gets the torch.compile call of that entry, where the probe saw it.
    Returns the steps whose call of that entry ran in eager mode past the limit."""
    eager_steps: list[int] = []
    key = p.first_entry()
    if key is None:
        return eager_steps
    call = next((c for c in p.compile_calls if c.key == key and c.file), None)
    for hit in hits:
        frame = FRAME.search(hit.compile_id)
        if frame is None or p.first_frame is None or int(frame.group(1)) != p.first_frame:
            continue
        if call is not None:
            hit.compile_file, hit.compile_line = call.file, call.line
            hit.compile_code = code_at(call.file, call.line)
        mine = [c for c in p.entry_calls if c[1] == key]
        past = next((i for i, c in enumerate(mine) if not c[3] and not c[4]), None)
        if past is None:
            continue
        later = mine[past:]
        hit.step = int(later[0][0])
        cached = [c for c in later if c[3]]
        eager = [c for c in later if not c[3] and not c[4]]
        hit.cached_calls, hit.eager_calls = len(cached), len(eager)
        hit.cached_shapes = list(dict.fromkeys(str(c[2]) for c in cached))
        hit.eager_shapes = list(dict.fromkeys(str(c[2]) for c in eager))
        eager_steps += sorted({int(c[0]) for c in eager})
        if "cuda" not in p.devices:
            hit.cached_ms_per_k, hit.eager_ms_per_k = _per_k(cached), _per_k(eager)
    return eager_steps


def _per_k(calls: list[list]) -> float | None:
    """Their host time per 1,000 elements of each call's first tensor: the calls' median
    (one call a busy machine held up moves no median)."""
    each = [float(c[5]) / int(c[6]) * 1e3 for c in calls if int(c[6])]
    return round(statistics.median(each), 6) if each else None


def window_work(p: ProcessRuntime, left_out: set[int]) -> tuple[str, float | None]:
    """Whether the window's steps did the work of the steps timed around it: ("", None)
    alike, each step one shape that ran a graph (their steps compare as they are);
    ("shapes", the window's cost) where they differ, over the shapes both ran a graph for
    (each shape's median step in the window against around it, their median); ("unlike",
    None) where either side has fewer than WORK_STEPS steps of those shapes."""
    work = p.step_work()
    if p.profiled is None or not work:
        return "", None
    kept = training_profile(p.profiled, left_out)
    window = {n: row[0] for n, row in zip(kept.step_numbers, kept.per_step, strict=False)}
    around = {
        n: t for n, t in zip(p.plain_steps, p.plain_step_ms, strict=False) if n not in left_out
    }
    if len({work[n][:2] for n in [*window, *around] if n in work}) <= 1:
        return "", None
    mine, theirs = (_by_shape(steps, work) for steps in (window, around))
    both = [x for x in mine if x in theirs]
    if min(sum(len(steps[x]) for x in both) for steps in (mine, theirs)) < WORK_STEPS:
        return "unlike", None
    ratio = statistics.median(
        statistics.median(mine[x]) / statistics.median(theirs[x]) for x in both
    )
    return "shapes", round(ratio - 1, 4)


def _by_shape(
    steps: dict[int, float], work: dict[int, tuple[str, bool, int]]
) -> dict[str, list[float]]:
    """The steps' times by their entry call's shapes, those that ran a graph."""
    out: dict[str, list[float]] = {}
    for n, ms in steps.items():
        if n in work and not work[n][1]:
            out.setdefault(work[n][0], []).append(ms)
    return out
