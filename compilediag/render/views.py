"""What every renderer shows alike, computed once from the Report: recompiles by frame, and
by cause over every frame and rank (one block, its fix said once)."""

from __future__ import annotations

from dataclasses import dataclass, field

from compilediag.paths import where
from compilediag.render import ms, plural, seconds, shown_id
from compilediag.render.glance import WAIT_METHODS
from compilediag.render.window_words import STALL, loop_lines_words, rest_named, stalled_words
from compilediag.report.model import (
    Breakdown,
    Recompile,
    Report,
    Runtime,
    StepBound,
    Timings,
    Tracing,
)
from compilediag.report.step import BOUND_CLOSE
from compilediag.report.vocabulary import RecompileCause, StepsAt
from compilediag.report.words import ALSO_CHANGED as ALSO
from compilediag.report.words import (
    ONE_GUARD,
    backward_split,
    forward_split,
    short_name,
    steps_words,
)
from compilediag.trace.formats import AFTER_BREAK, guard_pattern


@dataclass
class FrameRecompiles:
    """One frame's recompiles, in order (the HTML's timeline of a frame)."""

    frame: str
    file: str
    line: int
    items: list[Recompile] = field(default_factory=list)
    common_fix: str = ""  # one fix for every recompile of the frame, where it has several
    limit_hit: bool = False


def recompiles_by_frame(report: Report) -> list[FrameRecompiles]:
    """The frames in order of their first recompile."""
    by_frame: dict[tuple[str, str, int], list[Recompile]] = {}
    for r in report.recompiles:
        by_frame.setdefault((r.frame, r.file, r.line), []).append(r)
    hits = {(h.frame, h.file, h.line) for h in report.recompile_limit_hits}
    frames = []
    for key, items in by_frame.items():
        fixes = {r.suggestion for r in items}
        common = fixes.pop() if len(fixes) == 1 and len(items) > 1 else ""
        frames.append(FrameRecompiles(*key, items, common, key in hits))
    return frames


@dataclass
class Cause:
    """The recompiles of one cause, over every frame and rank (#68: one cause, one block):
    the same kind of guard on the same subject (`input_ids dim 1`, whatever its values).
    The lead's fix is said once, with the other fixes its frames gave (a later value
    another fix, the code after a break its own); what else the calls changed, from their
    `also_changed`; the JSON keeps every record."""

    items: list[Recompile]
    frames: list[tuple[str, str, int]] = field(default_factory=list)  # in order, the lead's first
    fix: str = ""
    more: list[tuple[str, str]] = field(default_factory=list)  # (compile id, fix), another's
    also: list[str] = field(default_factory=list)  # what else changed, each once
    also_by: list[str] = field(default_factory=list)  # the compile ids whose calls changed it

    def also_words(self) -> str:
        """What else the calls changed, said of the calls that changed it (a look read
        "these calls also changed `scale`" of a group whose first call did not)."""
        if not self.also:
            return ""
        ids = list(dict.fromkeys(self.also_by))
        who = (
            "this call" if len(self.items) == 1
            else "these calls" if len(self.also_by) == len(self.items)
            else f"the call of {ids[0]}" if len(ids) == 1
            else f"the calls of {', '.join(ids)}"
        )  # fmt: skip
        changed = "; ".join(self.also)
        return f"{ONE_GUARD} {who} also changed {changed}. A fix has to cover each of them."


def recompile_causes(report: Report) -> list[Cause]:
    """The causes in order of their first recompile."""
    by_cause: dict[tuple[str, str], list[Recompile]] = {}
    for r in report.recompiles:
        by_cause.setdefault(cause_key(r), []).append(r)
    out = []
    for items in by_cause.values():
        lead = items[0]
        frames = list(dict.fromkeys((r.frame, r.file, r.line) for r in items))
        # the lead frame's fixes, each once, and the code after a break's own (its inputs
        # are the function's locals, not marked as the model's input is: a look read the
        # lead's mark_dynamic as the fix of both); one that differs only by naming its own
        # frame is the same fix
        said = {core_fix(lead).replace(lead.frame, "\0")}
        more = []
        for r in items:
            if (r.frame, r.file, r.line) != frames[0] and AFTER_BREAK not in r.frame:
                continue
            fix, same = core_fix(r), core_fix(r).replace(r.frame, "\0")
            if fix and same not in said:
                said.add(same)
                more.append((r.compile_id, fix))
        also = _each_source_once([a for r in items for a in r.also_changed])
        by = [shown_id(report, r.compile_id) for r in items if r.also_changed]
        out.append(Cause(items, frames, core_fix(lead), more, also, by))
    return out


def _each_source_once(also: list[str]) -> list[str]:
    """What else the calls changed, a source once (its digits kept: `feats[1]` and
    `feats[2]` are two) with each kind of change it had: `attention_mask` (size 1x8 → size
    Nx8 ...; then size Nx8 ... → size NxM ...)."""
    changes: dict[str, dict[str, str]] = {}
    for a in also:
        name, sep, change = a.partition(" (")
        changes.setdefault(name, {}).setdefault(guard_pattern(change), change)
    out = []
    for name, kinds in changes.items():
        said = list(kinds.values())
        if len(said) == 1 or not all(x.endswith(")") for x in said):
            out += [f"{name} ({x}" if x else name for x in said]
            continue
        out.append(f"{name} ({'; then '.join(x[:-1] for x in said)})")
    return out


def cause_key(r: Recompile) -> tuple[str, str]:
    """A recompile's cause: its kind of guard and the guard's subject, values blanked; a
    module's `training` flag, whichever module torch names, is the model's mode."""
    if r.cause == RecompileCause.TRAINING:
        return str(r.cause), ""
    return str(r.cause), guard_pattern(r.failed_guard.split(" changed", 1)[0])


def core_fix(r: Recompile) -> str:
    """The recompile's fix without what else its call changed (`also_changed`, said apart)."""
    return r.suggestion.partition(ALSO)[0].rstrip() if r.also_changed else r.suggestion


# -- a `compilediag run` job's steps and profiling window, in words -----------------------


def step_words(r: Runtime) -> str:
    """What a step is: `12 calls of forward (train.py:26), compiled or eager`."""
    place = f"{r.step_frame} ({where(r.step_file, r.step_line)})"
    if r.steps_at == StepsAt.OPTIMIZER:
        skipped = (
            f" ({r.skipped_steps} skipped by GradScaler: inf or NaN gradients)"
            if r.skipped_steps else ""
        )  # fmt: skip
        return (
            f"{plural(r.steps, 'step')} of {r.optimizer}{skipped}{stopped_words(r)}; the model: "
            f"the compiled {place}"
        )
    if r.steps_at == StepsAt.ENTRY:
        # (once it trained, an evaluation's calls are not steps: they run between two)
        evaluated = any(w.kind == "evaluation" and w.calls for w in r.other_work)
        which = " that trained" if evaluated else ""
        return (
            f"{plural(r.steps, 'call')} of the compiled {place}{which}, compiled or eager"
            f"{stopped_words(r)}"
            + ("; its evaluation's calls run between them" if evaluated else "")
        )
    return f"{plural(r.steps, 'call')} of {place}'s graphs"


def bound_words(b: StepBound) -> str:
    """`data, 58% of the step: the data loader's next batch: ...`; `no one part: ...`"""
    if b.part == "none":
        return f"no one part: {b.why}"
    said = f"{b.part}, {b.share:.0%} of the step: {b.why}"
    if b.close:
        said += (
            f"; {b.close} close behind, {b.close_share:.0%} (within {1 - BOUND_CLOSE:.0%} of it: "
            "either may lead from run to run)"
        )
    return said


def tracing_words(t: Tracing, limit: int = 3) -> str:
    """`1.01 s tracing: table (model.py:6) 0.838 s own, 83% · forward (model.py:28) ...`:
    the costliest functions Dynamo traced, by their own time (that of the functions they
    called is theirs)."""
    shown = [f for f in t.functions if f.share >= 0.01][:limit]
    if not shown:
        return f"{seconds(t.total_s)}, none of it in a function of yours above 1%"
    parts = [
        f"{_traced_name(f.function)} ({where(f.file, f.line)}) {seconds(f.own_s)}"
        + (f" over {f.calls} traces" if f.calls > 1 else "") + f", {f.share:.0%}"
        for f in shown
    ]  # fmt: skip
    return f"{seconds(t.total_s)}; the most, by their own time: " + " · ".join(parts)


def _traced_name(function: str) -> str:
    """Dynamo's name for the code after a graph break (`torch_dynamo_resume_in_forward_at_17`)
    in words: `forward after line 17`."""
    name, at, line = function.removeprefix(RESUME).rpartition("_at_")
    return f"{name} after line {line}" if function.startswith(RESUME) and at else function


RESUME = "torch_dynamo_resume_in_"


def stopped_words(r: Runtime) -> str:
    """` (ended after step 12: --stop-after)` where the job made that many steps."""
    if r.stop_after is None or r.steps < r.stop_after:
        return ""
    return f" (ended after step {r.stop_after}: --stop-after)"


def rest_words(r: Runtime) -> str:
    """What the rest of a step holds where no backward or optimizer step was seen in it, by
    what the window's steps were (a look read "backward, optimizer, data" of a job that ran
    neither)."""
    measured = max(r.window_steps, 1)
    evaluating = max(r.window_no_grad, r.window_eval)
    if evaluating >= measured:
        return "outside compiled code: these steps were evaluation calls"
    some = f"{evaluating} of the steps were evaluation calls, and " if evaluating else ""
    return (
        f"outside the compiled calls: the loop's own code, its data; {some}no backward or "
        "optimizer step was seen"
    )


def step_text(r: Runtime, b: Breakdown) -> str:
    """`26.4 ms: forward 3.31 ms (in graphs 3.19 ms · Python between them 0.113 ms) · backward
    7.07 ms · optimizer 12.4 ms · the rest 0.887 ms (steps 4-10, 7 measured)`, or its rest."""
    a, z = r.window
    window = f"steps {a}-{z}, {b.calls} measured" + (
        f", rank {r.window_rank}" if r.window_rank is not None else ""
    )
    split = forward_split(b.in_graphs_ms, b.between_graphs_ms, b.hooks_ms, b.module_ms,
                          b.wrapper, b.in_call_ms, b.eager_rest)  # fmt: skip
    parts = b.parts()
    if len(parts) == 2:  # forward and the rest: no training part was seen
        return f"{ms(b.call_ms)}: {split} · the rest {ms(b.outside_ms)} ({rest_words(r)}; {window})"
    inside = {"forward": f" ({split})", "the rest": rest_named(b, bool(r.kernel_device), r.kernel_step_numbers),
              "backward": backward_split(b.backward_hooks_ms, b.wrapper, b.eager_backward_ms)}  # fmt: skip
    said = [f"{name} {ms(v)}{inside.get(name, '')}" for name, v in parts]
    mine = next((s for s in r.rank_steps if s.rank == r.window_rank), None)
    waits_for = mine.waits_for if mine is not None else None
    return (
        f"{ms(b.call_ms)}: {' · '.join(said)}{collectives_words(b, r, None, waits_for)} ({window})"
    )


def collectives_words(
    b: Breakdown, r: Runtime | None = None, step_ms: float | None = None,
    waits_for: int | None = None,
) -> str:  # fmt: skip
    """`; of the step, 41.6 ms waiting for rank 1 (in its collectives); collectives 22.1 ms a step
    beside them over the kernel profile's steps 9-13 of 35.2 ms (...)`: the wait for the
    rank that arrived last (`waits_for`), measured in the window's steps and held by its
    parts; then the collectives' time, not a part (their stream or thread runs alongside the
    parts), with the kernel profile's steps it was taken over (`step_ms`: that rank's
    kernel step), never set against the window's step."""
    said = ""
    if b.communication_wait_ms is not None and (waits_for is not None or b.communication_wait_ms):
        whom = f"rank {waits_for}" if waits_for is not None else "the last rank"
        said = (
            f"; of the step, {ms(b.communication_wait_ms)} waiting for {whom} (in its collectives)"
        )
    if b.communication_ms is None:
        return said
    over = ""
    step_ms = step_ms or (r.kernel_step_ms if r is not None else None)
    if r is not None and step_ms:
        over = f" over the kernel profile's {kernel_steps_words(r)} of {ms(step_ms)}"
    exposed = ""
    if b.communication_exposed_ms is not None:
        exposed = f" ({ms(b.communication_exposed_ms)} of it with no compute beside it)"
    waits = ", waits for other ranks included" if b.communication_wait_ms is None else ""
    return f"{said}; collectives {ms(b.communication_ms)} a step beside them{over}{exposed}{waits}"


def kernel_steps_words(r: Runtime) -> str:
    """`steps 10-14` (the kernel profile's)."""
    n = r.kernel_step_numbers
    return steps_words(n) if n else plural(r.kernel_steps, "step")


RANKS_SHOWN = 8


def rank_step_rows(r: Runtime) -> list[tuple[str, str]]:
    """Each rank's step in parts but the one the step above is (window_rank), the rank that
    waits least first (the others wait for it: by its wait in the window where measured,
    else its collectives' time); past RANKS_SHOWN ranks, the rest in one line."""
    shown = [s for s in r.rank_steps if s.rank != r.window_rank]
    ordered = sorted(
        shown,
        key=lambda s: (
            s.breakdown.communication_wait_ms
            if s.breakdown.communication_wait_ms is not None
            else s.breakdown.communication_ms or 0.0
        ),
    )
    rows = []
    for s in ordered[:RANKS_SHOWN]:
        b = s.breakdown
        parts = " · ".join(f"{name} {ms(v)}" for name, v in b.parts())
        said = collectives_words(b, r, s.kernel_step_ms, s.waits_for)
        rows.append((f"rank {s.rank}", f"{ms(b.call_ms)}: {parts}{said}"))
    rest = ordered[RANKS_SHOWN:]
    if rest:
        steps = sorted(s.breakdown.call_ms for s in rest)
        rows.append(("", f"and {plural(len(rest), 'more rank')}: steps of {ms(steps[0])} to "
                     f"{ms(steps[-1])} (all of them in the JSON: runtime.rank_steps)"))  # fmt: skip
    return rows


def unmeasured_words(r: Runtime) -> str:
    a, z = r.window
    if r.window_compiled:
        return (
            f"not measured: torch compiled during every step of the window (--profile-steps "
            f"{a}-{z})"
        )
    if r.steps_at == StepsAt.OPTIMIZER and a == 1 == z:
        return "not measured: step 1 ended before the steps were known to be the optimizer's"
    return f"not measured: the job made fewer than {z + 1} steps (--profile-steps {a}-{z})"


def steps_made(r: Runtime) -> str:
    """`32 steps of SGD` / `12 steps (calls of the compiled forward)`: how many steps the job
    made, and what they were, in a few words."""
    if r.steps_at == StepsAt.OPTIMIZER:
        return f"{plural(r.steps, 'step')} of {r.optimizer}" if r.optimizer else (
            f"{plural(r.steps, 'optimizer step')}"
        )  # fmt: skip
    what = (
        f"the compiled {r.step_frame}"
        if r.steps_at == StepsAt.ENTRY
        else f"{r.step_frame}'s graphs"
    )
    return (
        f"{plural(r.steps, 'step')} (calls of {what})" if r.step_frame else plural(r.steps, "step")
    )


def window_missed(r: Runtime) -> str:
    """The warning a window the job never reached gets (`--profile-steps 50-60` on a job
    of 32 steps), with a window within its steps of the same length; '' when it was
    reached (or not asked for)."""
    if not r.window or r.steps >= r.window[0]:
        return ""
    a, z = r.window
    said = f"--profile-steps {a}-{z} timed nothing: the job made {steps_made(r)}, so step {a} never came"
    if r.steps < 2:  # step 1 compiles: a job of one step has none to time
        return f"{said}; run the job for more steps to time them"
    end = r.steps
    start = max(2, end - (z - a))
    return f"{said}; profile steps within them, e.g. --profile-steps {start}-{end}"


def after_the_compiles(r: Runtime) -> str:
    """Where to time steps after the last compile, within the steps a job that ended on its
    own made (a look was advised steps 4-6 of a job of 5: one step timed, a verdict from it)."""
    a, z = r.window
    after = max(r.window_compiled) + 1
    end = after + z - a
    if r.stop_after is None and not r.interrupted:
        # a step of calls is timed to the next call: the job's last has none to end it
        end = min(end, r.steps - (r.steps_at != StepsAt.OPTIMIZER))
    if end - after < 1:
        return "too few steps came after the last compile to time several: run the job longer"
    return f"profile steps after the last compile (--profile-steps {after}-{end})"


def window_notes(r: Runtime, t: Timings | None) -> list[tuple[str, str]]:
    """What a reader of the window's figures must know: steps left out because torch
    compiled in them (and where to look instead), evaluation steps, what the window's own
    timing cost against the steps around it, and what the kernel profile costs after it
    (and, where it timed no kernel, what it gave: `t`, the report's timings)."""
    notes: list[tuple[str, str]] = []
    a, z = r.window
    if r.window_compiled:
        notes.append(
            (
                "compiles",
                f"{steps_words(r.window_compiled)} compiled (torch compiled during "
                f"{'them' if len(r.window_compiled) > 1 else 'it'}): left out, so no compile "
                f"is counted as a step's time; {after_the_compiles(r)}",
            )
        )
    worked = [n for n in r.window_left_out if str(n) not in r.window_stalled]
    if worked:
        kinds = {"evaluation": "an evaluation", "checkpoint": "a checkpoint's save"}
        held = [
            f"{kinds.get(w.kind, w.kind)} ({short_name(w.function)})"
            for w in r.other_work if set(w.steps) & set(worked)
        ]  # fmt: skip
        notes.append((
            "left out",
            f"{steps_words(worked)} held {' and '.join(held) or 'other work'}: not a "
            "training step, left out of these figures on every rank (under Notes: its own "
            "cost, and the wait of the ranks that did not run it)",
        ))  # fmt: skip
    if r.window_stalled:
        notes.append(("stalled", stalled_words(r)))
    if r.unprofiled_step_ms and r.kernel_step_ms and r.kernel_step_ms > 1.05 * r.unprofiled_step_ms:
        notes.append(("profiling", _profiling(r, bool(t and t.kernels))))
    if r.wait_method:
        notes.append(("waits", WAIT_METHODS.get(r.wait_method, r.wait_method)))
    if r.loop and r.loop_steps:
        notes.append(("lines", loop_lines_words(r)))
    if r.kernels_off:
        notes.append(("kernels", "not profiled (--no-kernels)"))
    elif r.kernel_steps and r.kernel_device:
        notes.append((
            "kernels",
            f"profiled over the {plural(r.kernel_steps, 'step')} after the window. "
            "torch.profiler's CUDA activity slows the job's later steps too (1.10-1.12x "
            "on an H100, in one process: bench/cupti_after.py); --no-kernels leaves it out",
        ))  # fmt: skip
    return notes


def _profiling(r: Runtime, kernels: bool) -> str:
    """What the kernel profile's steps took against the steps around the window (their
    pace: pace_line), and where it timed no kernel, what it gave (a look read it with no
    kernels section after it: aot_eager generates none)."""
    assert r.unprofiled_step_ms and r.kernel_step_ms
    held, stalled = r.kernel_steps_held, r.kernel_steps_stalled
    out = f"; {steps_words(held)} held other work, left out" if held else ""
    out += f"; {steps_words(stalled)} took over {STALL:g}x the others, left out" if stalled else ""
    gave = "" if kernels else (
        "; no generated or library kernel ran in them (the backend generates none): it "
        "named the eager ops of the rest"
    )  # fmt: skip
    return (
        f"the kernel profile's steps ({kernel_steps_words(r)}{out}) took {ms(r.kernel_step_ms)}, "
        f"{r.kernel_step_ms / r.unprofiled_step_ms:.2g}x the "
        f"{f'{r.unprofiled_steps} ' if r.unprofiled_steps else ''}steps timed outside the window: "
        f"torch.profiler's own cost, so its figures are set against its own steps{gave}"
    )
