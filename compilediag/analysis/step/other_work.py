"""A training job's steps that are not training steps: the evaluation a job runs every few
steps (on every rank, or on rank 0 alone) and the checkpoint it saves, named by their
function, their steps and their own cost; and a step that stalled (many times the others,
nothing named in it: a garbage collection, a library's lazy start). Those steps are left
out of the training step's figures on every rank (a rank that did not evaluate waited for
the one that did, in its collectives), and the wait each other rank had is said. The
probe records each step's figures (Profiled.per_step, step_regions): the figures here are
taken over the steps that remain."""

from __future__ import annotations

import os
import statistics
from collections.abc import Iterable

from compilediag.analysis.callers import framework_name
from compilediag.harness.bootstrap._compilediag_runtime.kernel_window import STALL, STALL_MS
from compilediag.harness.worker_types import OtherWork, ProcessRuntime, Profiled, RegionTime
from compilediag.paths import library_path, portable_text, possessive
from compilediag.report.model import StepWork
from compilediag.report.vocabulary import Finding, FindingKind
from compilediag.report.words import ms, short_name, steps_listed, work_when

ROW = ("step", "forward", "backward", "optimizer", "data", "the rest", "evaluation")


def work_steps(processes: Iterable[ProcessRuntime]) -> set[int]:
    """The steps in which any process of a training job did other work."""
    return {w.step for p in processes if p.trains() for w in p.other_work}


# a window's step this many times the median of its other steps, with no compile and no
# other work in it, stalled (torch 2.15 on CPU: one step of 246 ms among steps of 5 ms, the
# job's own clock agreeing; the mean over 5 steps read 48 ms and named the wrong part) -
# where Python's garbage collector took most of the excess, or one part of the step holds
# PAUSED of it (a lazy start); a step whose forward and backward both grew (a longer batch)
# is a training step, and stays; and a pause is STALL_MS or more (steps of microseconds,
# a notebook's small function under capture(), vary 3x by themselves): the kernel
# profile's own rule for its steps (STALL, STALL_MS)
PAUSED = 0.8


def stalled_steps(
    processes: Iterable[ProcessRuntime], left_out: set[int]
) -> dict[int, tuple[float, float]]:
    """The window's steps that stalled on any rank, among those not `left_out` (the probe
    leaves out a step torch compiled in); step -> (its ms, the garbage collections' ms in
    it where they took most of the pause, else 0), the longest rank's. {} where as many as
    half would be: then the steps just differ, and the figures stand."""
    out: dict[int, tuple[float, float]] = {}
    for p in processes:
        prof = p.profiled
        if prof is None or len(prof.per_step) != len(prof.step_numbers):
            continue  # an older release's file keeps no step's own figures
        rows = {
            n: r for n, r in zip(prof.step_numbers, prof.per_step, strict=True) if n not in left_out
        }
        if len(rows) < 3:
            continue
        slow = {}
        work = p.step_work()
        shapes = [work[n][0] for n in rows if n in work]
        usual = statistics.mode(shapes) if shapes else None
        for n, r in rows.items():
            gc = p.gc_ms.get(str(n), 0.0)
            by_gc = _paused(n, rows, gc)
            if by_gc is None and usual is not None and work.get(n, ("",))[0] == usual:
                # a step of the usual shapes, its excess spread over its parts: the machine
                # held it (a busy machine's other processes), not a longer batch
                by_gc = _paused(n, rows, gc, spread=True)
            if by_gc is not None:
                slow[n] = (r[0], gc if by_gc else 0.0)
        if 2 * len(slow) >= len(rows):
            return {}
        for n, (t, gc) in slow.items():
            if t > out.get(n, (0.0, 0.0))[0]:
                out[n] = (t, gc)
    return out


def _paused(
    n: int, rows: dict[int, list[float]], gc_ms: float, spread: bool = False
) -> bool | None:
    """Whether step `n`'s pause was the collector's (None: no pause): it took STALL times
    the others' median, and its excess is the collector's or lies in one part (`spread`:
    or anywhere)."""
    others = [r for m, r in rows.items() if m != n]
    usual = [statistics.median(r[i] if i < len(r) else 0.0 for r in others) for i in range(7)]
    row = rows[n]
    excess = row[0] - usual[0]
    if usual[0] <= 0 or row[0] <= STALL * usual[0] or excess < STALL_MS:
        return None
    if gc_ms >= excess / 2:
        return True
    parts = [(row[i] if i < len(row) else 0.0) - usual[i] for i in range(1, 7)]
    return False if spread or max(parts) >= PAUSED * excess else None


def training_profile(p: Profiled, left_out: set[int]) -> Profiled:
    """The window's figures over its steps not `left_out` (each part's mean, each graph's);
    as measured where the probe kept no step's own figures (an older release's file), where
    no step is left out, or where every step would be."""
    kept = [i for i, n in enumerate(p.step_numbers) if n not in left_out]
    if not p.step_regions or len(kept) == len(p.step_numbers) or not kept:
        return p
    rows = [p.per_step[i] for i in kept]
    n = len(kept)

    def mean(column: int) -> float:
        return sum(r[column] for r in rows if len(r) > column) / n

    regions: dict[str, list[float]] = {}
    for i in kept:
        for cid, figures in p.step_regions[i].items():
            sums = regions.setdefault(cid, [0.0] * 4)
            for j, x in enumerate(figures[:4]):
                sums[j] += x
    return Profiled(
        calls=n, call_ms=mean(0), outside_ms=mean(5), backward_ms=mean(2), optimizer_ms=mean(3),
        data_ms=mean(4), evaluation_ms=mean(6), per_step=rows, wrapper=p.wrapper,
        hooks_ms=mean(7), module_ms=mean(8), backward_hooks_ms=mean(9), in_call_ms=mean(10),
        step_numbers=[p.step_numbers[i] for i in kept],
        step_regions=[p.step_regions[i] for i in kept],
        regions=[RegionTime(cid, *(x / n for x in sums)) for cid, sums in regions.items()],
    )  # fmt: skip


def plain_training_ms(p: ProcessRuntime, left_out: set[int]) -> list[float]:
    """The steps around the window, timed once each, but those that held other work."""
    if len(p.plain_steps) != len(p.plain_step_ms):  # an older release's file
        return list(p.plain_step_ms)
    return [t for n, t in zip(p.plain_steps, p.plain_step_ms, strict=True) if n not in left_out]


def evaluation_graphs(p: ProcessRuntime) -> set[str]:
    """The graphs (compile ids) a training job's process called in evaluation alone."""
    return {c for c, n in p.evaluation_calls.items() if n and n == p.calls.get(c)}


def step_work(processes: list[ProcessRuntime], left_out: set[int]) -> list[StepWork]:
    """Each kind of other work, named once with the ranks that ran it, its steps, its
    median cost, and the other ranks' wait for it in the window's steps that held it."""
    found: dict[tuple[str, str, str, int], tuple[list[int], list[OtherWork]]] = {}
    for p in processes:
        for w in p.other_work if p.trains() else []:
            ranks, seen = found.setdefault((w.kind, w.function, w.file, w.line), ([], []))
            if p.rank is not None and p.rank not in ranks:
                ranks.append(p.rank)
            seen.append(w)
    out = []
    for (kind, function, file, line), (ranks, seen) in found.items():
        steps = sorted({w.step for w in seen})
        ended = [w for w in seen if not w.unfinished] or seen
        timed = [w for w in ended if not w.compiled] or ended  # a compile is not its cost
        compiling = [w.ms for w in ended if w.compiled] if len(timed) < len(ended) else []
        out.append(
            StepWork(
                kind, function, portable_text(file, os.getcwd()), line, steps, sorted(ranks),
                ms=round(statistics.median(w.ms for w in timed), 6),
                calls=statistics.median(w.calls for w in seen),
                waited_ms=_waits(processes, ranks, set(steps), left_out),
                compiled=all(w.compiled for w in seen),
                unfinished=all(w.unfinished for w in seen),
                compiled_times=len(compiling),
                compiled_ms=round(statistics.median(compiling), 6) if compiling else 0.0,
                between_steps=all(w.before for w in seen),
            )
        )  # fmt: skip
    return out


def _waits(
    processes: list[ProcessRuntime], ranks: list[int], steps: set[int], left_out: set[int]
) -> dict[str, float]:
    """Each rank that did not run the work: its extra time in the window's steps that held
    it (the step against its median training step), the median over those steps."""
    out = {}
    for p in processes:
        if p.rank is None or p.rank in ranks or p.profiled is None:
            continue
        rows = dict(zip(p.profiled.step_numbers, p.profiled.per_step, strict=False))
        usual = [r[0] for n, r in rows.items() if n not in left_out]
        held = [rows[n][0] for n in sorted(steps) if n in rows]
        if usual and held:
            typical = statistics.median(usual)
            out[str(p.rank)] = round(max(0.0, statistics.median(held) - typical), 6)
    return out


# each kind's calls, one and several
CALLS = {
    "evaluation": ("call of the compiled model", "calls of the compiled model"),
    "checkpoint": ("torch.save call", "torch.save calls"),
}


def work_notes(
    work: list[StepWork], window: list[int], left_out: list[int], last: int = 0
) -> list[Finding]:
    """One note for the work of the same steps and ranks (an evaluation and the checkpoint
    saved after it, as nanoGPT does): what ran, where, in which steps (`last`: the job's
    last step, work after it said so), at what cost, which of them the window left out,
    who waited for it."""
    groups: dict[tuple[tuple[int, ...], tuple[int, ...]], list[StepWork]] = {}
    for w in work:
        groups.setdefault((tuple(w.steps), tuple(w.ranks)), []).append(w)
    notes = []
    for (steps, ranks), works in groups.items():
        who = f", rank {ranks[0]} alone" if len(ranks) == 1 else ""
        kinds = " and ".join(dict.fromkeys(w.kind for w in works))
        each = "; ".join(f"{_named(w)}, {work_cost(w)}, {_calls(w)}" for w in works)
        when = work_when(list(steps), works[0].between_steps, last)
        text = f"{kinds} {when}{who}): {each}"
        held = [n for n in steps if n in left_out]
        if held and window:
            text += (
                f"; step{'s' if len(held) > 1 else ''} {steps_listed(held)} of the window left out"
            )
            text += " of the training step's figures"
        waited = works[0].waited_ms  # the same steps: the same waits
        if waited:
            waits = ", ".join(f"rank {r} {ms(v)}" for r, v in sorted(waited.items()))
            text += f"; the other ranks waited for it in their collectives: {waits} (the median)"
        notes.append(Finding(FindingKind.OTHER_WORK, text))
    return notes


def work_cost(w: StepWork) -> str:
    """`35.7 ms each`; one under way when the job stopped: its time so far (a look read "0 ms
    each" for an evaluation compiling for 8 minutes at SIGTERM)."""
    if w.unfinished:
        return f"under way when the job stopped, {ms(w.ms)} in"
    if w.compiled_times:  # (a look's VAE read "198 ms each" beside its first pass's 352 ms)
        times = "the time" if w.compiled_times == 1 else f"the {w.compiled_times} times"
        return f"{ms(w.ms)} each ({ms(w.compiled_ms)} {times} torch compiled in it)"
    return f"{ms(w.ms)} each"


def _calls(w: StepWork) -> str:
    """`16 calls of the compiled model`; an evaluation that made none ran uncompiled."""
    if w.kind == "evaluation" and not w.calls:
        return "the model uncompiled (no call of the compiled model)"
    one, several = CALLS.get(w.kind, ("call", "calls"))
    return f"{w.calls:g} {one if w.calls == 1 else several}"  # (a look read "1 torch.save calls")


def _named(w: StepWork) -> str:
    """The work's function and line: a framework's (Lightning's validation loop) named as
    its, from its package down; the user's own by their file's name."""
    framework = framework_name(w.file)
    if framework:
        return f"{possessive(framework)} `{short_name(w.function)}` ({library_path(w.file) or w.file}:{w.line})"
    return f"{short_name(w.function)} ({os.path.basename(w.file)}:{w.line})"
