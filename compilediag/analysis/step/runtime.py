"""The runtime facts of a `compilediag run` job (or a `capture()` block): each graph's
calls, the profiling window's time per step in graphs, between them and outside compiled
code, and how the job ended. Read from the probe's files; put into the Report by
build_report."""

from __future__ import annotations

import json
import os
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from compilediag.analysis.compile.timings import breakdown_of
from compilediag.analysis.step.advice import rest_parts, step_advice
from compilediag.analysis.step.entry_calls import limit_calls, window_work
from compilediag.analysis.step.kernel_times import (
    first_by_name,
    kernel_advice,
    kernel_timings,
    tf32_advice,
)
from compilediag.analysis.step.other_work import (
    plain_training_ms,
    stalled_steps,
    step_work,
    work_notes,
    work_steps,
)
from compilediag.analysis.step.pace import MEAN_OVER, MIN_AROUND, Pace, at_pace, medians_on, pace_of
from compilediag.analysis.step.stragglers import stragglers
from compilediag.analysis.step.verdict import bound_advice, bound_of
from compilediag.analysis.step.waits import (
    Waits,
    collective_waits,
    line_stalls,
    line_steps,
    loop_lines,
    loop_step_ms,
    stalled_at,
)
from compilediag.harness.worker_types import ProcessRuntime, Profiled
from compilediag.paths import portable_path, portable_text
from compilediag.report.model import (
    Breakdown,
    RankStep,
    Report,
    Runtime,
    Timings,
)
from compilediag.report.serial import from_json, to_json
from compilediag.report.vocabulary import StepsAt
from compilediag.trace.compiles import id_of
from compilediag.trace.formats import WRAPPER_FRAME

RUNTIME_FOLDER = "compilediag_runtime"  # inside the trace folder; trace_files() skips folders


@dataclass
class JobRun:
    """A job as it ran: how it ended (`job`) and what each of its processes' probe saw."""

    job: Runtime
    processes: list[ProcessRuntime] = field(default_factory=list)


JOB_FILE = "job.json"  # how the command ended, beside the processes' files


def save_job(trace_dir: Path, job: Runtime) -> None:
    """Kept with a kept trace, so that `compilediag report DIR` gives the same report."""
    folder = trace_dir / RUNTIME_FOLDER
    folder.mkdir(exist_ok=True)
    (folder / JOB_FILE).write_text(to_json(job))


def read_job_run(trace_dir: Path) -> JobRun | None:
    """A `compilediag run` job's facts, in a trace folder that `run --trace-dir` kept."""
    saved = trace_dir / RUNTIME_FOLDER / JOB_FILE
    if not saved.is_file():
        return None
    try:
        job = from_json(Runtime, saved.read_text())
    except (OSError, ValueError, TypeError):
        return None
    return JobRun(job, read_processes(trace_dir))


def read_job_runs(trace_dirs: list[Path]) -> JobRun | None:
    """The job's facts from each node's kept folder (`run --trace-dir` on every node of a
    multi-node job): every process's, lowest rank first; how the job ended, from the first
    folder that says (its wall time the longest node's)."""
    runs = [r for d in trace_dirs if d.is_dir() and (r := read_job_run(d)) is not None]
    if not runs:
        return None
    job = runs[0].job
    job.wall_s = max(r.job.wall_s for r in runs)
    processes = sorted((p for r in runs for p in r.processes), key=_rank_order)
    return JobRun(job, processes)


def read_processes(trace_dir: Path) -> list[ProcessRuntime]:
    """Every process's runtime file, lowest rank first (a file cut short is left out)."""
    out = []
    for f in sorted((trace_dir / RUNTIME_FOLDER).glob("runtime-*.json")):
        try:
            out.append(from_json(ProcessRuntime, f.read_text()))
        except (OSError, ValueError, TypeError):
            continue
    return sorted(out, key=_rank_order)


def _rank_order(p: ProcessRuntime) -> tuple[int, int]:
    return (p.rank if p.rank is not None else 1 << 30, p.pid)


def apply_runtime(report: Report, run: JobRun, cudagraph_skips: list[str] | None = None) -> None:
    """Calls per graph, the window's breakdown (given to the breaks as their cost), and
    the job's own facts, onto a Report under construction; `cudagraph_skips`: the
    reasons the trace gives. The figures are the lowest rank's (each rank's steps in
    rank_steps), over its training steps: a step that held an evaluation on any rank is
    left out."""
    from compilediag.analysis.compile.breaks import framework_wrapped

    # a process that called torch.compile but never ran a graph wrote its file too (what
    # it compiled, for "compiled nothing"): the figures are those of processes that ran one,
    # or that stepped an optimizer (its steps are measured whether or not a graph ran:
    # torch.compile(DDP(model)) that broke inside DDP's code and compiled nothing)
    processes = [
        p for p in run.processes if p.calls or (p.steps_at == StepsAt.OPTIMIZER and p.steps)
    ]
    if processes:  # none: the probe never ran (python -I or -S, a Python without site)
        graph_calls(report, processes)
    job = run.job
    job_totals(job, processes, cudagraph_skips)
    left_out = work_steps(processes)  # steps that held evaluation, on any rank
    stalled = stalled_steps(processes, left_out)
    job.window_stalled = {str(n): round(t, 3) for n, (t, _) in sorted(stalled.items())}
    job.window_stalled_gc = {str(n): gc for n, (_, gc) in sorted(stalled.items()) if gc}
    left_out |= set(stalled)
    first = processes[0] if processes else None
    if first is not None and first.tracing is not None and report.compile_time is not None:
        report.compile_time.tracing = first.tracing  # the lowest rank's, its files portable
        for f in first.tracing.functions:
            f.file = portable_path(f.file, os.getcwd())
    if first is not None:
        job_facts(job, first, left_out)
        job.limit_eager_steps = limit_calls(report.recompile_limit_hits, first)
        job.window_work, job.window_cost = window_work(first, left_out)
        pace = pace_of(first, left_out, alike=not job.window_work)
        job.window_step_ms, job.window_load = pace.window_ms, list(first.load)
        job.at_pace, job.before_step_ms, job.pace_moved = pace.at_pace, pace.before_ms, pace.moved
        job.pace_apart = pace.apart
        job.window_spread_ms = list(pace.spread) if pace.varies and pace.spread else []
        if pace.around >= MIN_AROUND:  # the steps the pace is taken from
            job.unprofiled_step_ms, job.unprofiled_steps = pace.around_ms, pace.around
            if pace.around_mean_ms and pace.around_mean_ms >= MEAN_OVER * (pace.around_ms or 0):
                job.unprofiled_mean_ms, job.unprofiled_slow = pace.around_mean_ms, pace.around_slow
        if not job.window_work:
            job.window_cost = pace.cost
        # steps of a rank's kernel profile that held other work on another rank
        profiled = {n for p in processes for n in p.kernel_step_numbers}
        job.kernel_steps_waited = sorted(profiled & left_out)
        step_place(job, report, first)
        waits = collective_waits(processes, left_out)
        job.window_stalled_at = stalled_at(first, set(stalled), left_out)
        job.loop_stalled = line_stalls(first, left_out)
        timed_out = left_out | set(job.loop_stalled)
        job.loop = loop_lines(first, timed_out)
        job.loop_steps = line_steps(first, timed_out)
        job.loop_step_ms = loop_step_ms(first, timed_out)
        job.wait_method = waits.method
        if first.profiled is not None:
            window_figures(report, job, first, left_out, pace, waits)
        job.rank_steps = rank_steps(processes, left_out, waits)
        job.stragglers = stragglers(job.rank_steps)
    job.other_work = step_work(processes, left_out)
    last = job.steps if job.steps_at == StepsAt.OPTIMIZER else 0
    report.notes += work_notes(job.other_work, job.window, job.window_left_out, last)
    if first is not None and report.timings is not None and report.timings.breakdown is not None:
        job.bound = bound_of(report, job, report.timings.breakdown, "cuda" in first.devices)
        report.timings.notes = bound_advice(report, job) + report.timings.notes
    framework_wrapped(
        report, [(c.what, c.file, c.line) for p in run.processes for c in p.compile_calls]
    )
    report.runtime = job


def graph_calls(report: Report, processes: list[ProcessRuntime]) -> None:
    """Each graph's calls, summed over the processes (a rank's own under its prefix)."""
    calls: Counter[str] = Counter()
    for proc in processes:
        for cid, n in proc.calls.items():
            calls[cid] += n
            if proc.rank is not None:
                calls[f"r{proc.rank}:{cid}"] += n
    for g in report.graphs:
        g.calls = calls.get(g.compile_id, 0)


def job_totals(
    job: Runtime, processes: list[ProcessRuntime], cudagraph_skips: list[str] | None
) -> None:
    """What every process adds to: how many compiled, CUDA graphs skipped and recorded."""
    job.processes = len(processes)
    job.cudagraph_skips = sum(p.cudagraph_skips for p in processes)
    job.cudagraph_rerecords = sum(p.cudagraph_rerecords for p in processes)
    logged = [why for p in processes for why in p.cudagraph_skip_reasons]
    job.cudagraph_skip_reasons = list(
        dict.fromkeys(portable_text(x, os.getcwd()) for x in [*(cudagraph_skips or []), *logged])
    )


def job_facts(job: Runtime, first: ProcessRuntime, left_out: set[int]) -> None:
    """The lowest rank's steps, optimizer, loader, window and kernel profile."""
    job.steps, job.window = first.steps, list(first.window)
    job.steps_at = StepsAt(first.steps_at)
    job.optimizer, job.optimizer_options = first.optimizer, dict(first.optimizer_options)
    job.skipped_steps = first.skipped_steps
    job.loaders = dict(first.loaders)
    job.model_calls = first.model_calls() if job.steps_at == StepsAt.OPTIMIZER else None
    job.window_rank = first.rank
    job.kernel_steps, job.kernel_device = first.kernel_steps, first.kernel_device
    job.kernels_off = first.kernels_off
    job.window_compiled = list(first.compiled_steps)
    job.window_no_grad, job.window_eval = first.no_grad_steps, first.eval_steps
    plain = plain_training_ms(first, left_out)
    if plain:
        job.unprofiled_step_ms = round(statistics.median(plain), 6)
        job.unprofiled_steps = len(plain)
    job.kernel_step_numbers = list(first.kernel_step_numbers)
    job.kernel_step_ms = first.kernel_step_ms
    job.kernel_steps_held = list(first.kernel_steps_held)
    job.kernel_steps_stalled = list(first.kernel_steps_stalled)


def step_place(job: Runtime, report: Report, first: ProcessRuntime) -> None:
    """The model a step runs: the first compiled frame's graph, or where that is torch's
    wrapper, what torch.compile was given, at its call."""
    prefix = _prefix(report, first)
    frame = first.first_frame
    if first.steps_at == StepsAt.OPTIMIZER and first.training_frame is not None:
        frame = first.training_frame  # not a sanity check's validation_step, run first
    step_graph = next((g for g in report.graphs if g.compile_id == f"{prefix}{frame}/0"), None)
    if step_graph is not None:
        job.step_frame = step_graph.frame
        job.step_file, job.step_line = step_graph.file, step_graph.line
    called = next((c for c in first.compile_calls if c.called and c.what), None)
    if job.step_frame == WRAPPER_FRAME and called is not None:
        job.step_frame = called.what
        job.step_file = portable_text(called.file, os.getcwd())
        job.step_line = called.line


def window_figures(
    report: Report, job: Runtime, first: ProcessRuntime, left_out: set[int], pace: Pace,
    waits: Waits | None = None,
) -> None:  # fmt: skip
    """The window's training steps in parts, set on `pace` (the job's own: pace.py), given
    to the breaks as their cost, with the kernel profile's figures (its collectives split
    into wait and transfer: `waits`) and the advice they make."""
    from compilediag.analysis.compile.timings import attribute_time

    assert first.profiled is not None
    p, by = at_pace(first, left_out, pace)
    job.window_left_out = sorted(set(first.profiled.step_numbers) - set(p.step_numbers))
    job.window_steps = p.calls
    job.step_medians = medians_on(step_medians(p), pace.step_ms)
    prefix = _prefix(report, first)
    for r in p.regions:
        r.compile_id = prefix + r.compile_id
    a, b = first.window
    unit = {
        StepsAt.OPTIMIZER: f"steps {a}-{b} of {first.optimizer} (from the end of one "
        "optimizer step to the end of the next)",
        StepsAt.ENTRY: f"calls {a}-{b} of the first compiled entry",
    }.get(job.steps_at, f"calls {a}-{b} of its first frame")  # job_facts set it
    report.timings = Timings(
        method=f"{unit}, each part timed (by CUDA events on CUDA); a step torch "
        "compiled in, or that held an evaluation on any rank, is left out"
    )
    attribute_time(report, p)
    breakdown = report.timings.breakdown
    if breakdown is not None:
        breakdown.communication_ms, breakdown.communication_exposed_ms = collectives_ms(
            first, left_out
        )
        _set_wait(breakdown, first, waits or Waits(), by)
        breakdown.rest = rest_parts(first)
        kernel_timings(report, first, breakdown)
        report.timings.notes = timing_notes(report, job, cuda="cuda" in first.devices)


def timing_notes(report: Report, job: Runtime, cuda: bool) -> list[str]:
    """The advice the window's parts and kernels make (again after --try-fixes, whose
    measurements it then says where it advised a remedy that was tried)."""
    t = report.timings
    if t is None or t.breakdown is None:
        return t.notes if t is not None else []
    return (
        step_advice(job, t.breakdown, cuda)
        + kernel_advice(report, job.kernel_step_ms)
        + tf32_advice(report)
    )


def collectives_ms(p: ProcessRuntime, left_out: set[int]) -> tuple[float | None, float | None]:
    """The time a step's collectives (NCCL's kernels, gloo's operations) ran, over the
    kernel profile's steps (calls that overlap counted once), and of it the time no compute
    ran beside; a step that held other work on any rank (`left_out`: this rank's wait for
    it) left out where the probe kept each step's. None where it saw none (the exposed
    time: not measured, an older release's file)."""
    if not any(k.kind == "communication" for k in p.kernels) or not p.kernel_steps:
        return None, None
    if p.step_collectives:
        kept = [x for x in p.step_collectives if int(x[0]) not in left_out]
        if not kept:  # every step of it held other work on a rank
            return None, None
        return (
            round(statistics.fmean(x[1] for x in kept), 6),
            round(statistics.fmean(x[2] for x in kept), 6),
        )
    exposed = p.collectives_exposed_ms
    return (
        round(p.collectives_ms / p.kernel_steps, 6),
        round(exposed / p.kernel_steps, 6) if exposed is not None else None,
    )


# the probe's order (an older release's rows: the first six)
PER_STEP = ("step", "forward", "backward", "optimizer", "data", "the rest", "evaluation")


def step_medians(p: Profiled) -> dict[str, float]:
    """The window's median step and the median of each part (one slow step moves a mean,
    not these); {} where the probe kept no steps."""
    return {
        name: round(statistics.median(step[i] if i < len(step) else 0.0 for step in p.per_step), 6)
        for i, name in enumerate(PER_STEP)
    } if p.per_step else {}  # fmt: skip


def rank_steps(
    processes: list[ProcessRuntime], left_out: set[int], waits: Waits | None = None
) -> list[RankStep]:
    """Each rank's window, where several ranks measured one: over its training steps, its
    collectives split into wait and transfer (`waits`), its loop's lines."""
    out = []
    waits = waits or Waits()
    for p in processes:
        if p.rank is None or p.profiled is None:
            continue
        alike = not window_work(p, left_out)[0]
        pace = pace_of(p, left_out, alike)
        profiled, by = at_pace(p, left_out, pace)
        b = breakdown_of(profiled)
        b.communication_ms, b.communication_exposed_ms = collectives_ms(p, left_out)
        _set_wait(b, p, waits, by)
        plain_ms = plain_training_ms(p, left_out)
        plain = round(statistics.median(plain_ms), 6) if plain_ms else None
        timed = left_out | set(line_stalls(p, left_out))
        out.append(
            RankStep(p.rank, b, plain, medians_on(step_medians(profiled), pace.step_ms),
                     p.kernel_step_ms,
                     waits.waits_for.get(p.rank), loop_lines(p, timed), loop_step_ms(p, timed))
        )  # fmt: skip
    return out if len(out) > 1 else []


def _set_wait(b: Breakdown, p: ProcessRuntime, waits: Waits, by: float = 1.0) -> None:
    """The rank's wait for the last rank, a step of its window set on the job's pace `by`
    the step's factor (never more than the step)."""
    wait = waits.wait_ms.get(p.rank) if p.rank is not None else None
    if wait is not None:
        b.communication_wait_ms = round(min(wait * by, b.call_ms), 6)


def _prefix(report: Report, p: ProcessRuntime) -> str:
    """The rank prefix the Report's compile ids carry for this process (`r1:`), if any."""
    if p.rank is None:
        return ""
    ranks = {cid.rank for g in report.graphs if (cid := id_of(g.compile_id)) is not None}
    return f"r{p.rank}:" if p.rank in ranks else ""


KERNEL_TRACE = "kernels-*.json"  # the probe's Chrome traces of the kernel steps (--profile-out)


def kernel_trace(trace_dir: Path, report: Report) -> dict | None:
    """The kernel profile of every process, as one Chrome trace (each process under its
    own pid): each generated kernel's events given its graph, its modules and the lines of
    the user's it came from (`args`). None where no process wrote one."""
    files = sorted((trace_dir / RUNTIME_FOLDER).glob(KERNEL_TRACE))
    by_name = first_by_name(report.kernels)
    events: list[dict] = []
    rest: dict = {}
    for path in files:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        for ev in data.get("traceEvents", []) if isinstance(data, dict) else []:
            known = by_name.get(ev.get("name", "")) if isinstance(ev, dict) else None
            if known is not None:
                args = ev.setdefault("args", {})
                args["compilediag graph"] = known.compile_id
                args["compilediag lines"] = list(known.source_lines)
                if known.modules:
                    args["compilediag modules"] = list(known.modules)
            events.append(ev)
        rest.update({key: v for key, v in data.items() if key != "traceEvents"})
    return {**rest, "traceEvents": events} if events else None
