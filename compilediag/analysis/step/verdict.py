"""What bounds a `compilediag run` step: the one part that holds most of it, from the window's
measured parts and, on CUDA, the kernels' busy time over the kernel profile's own steps.

Candidates (each a share of the step): the data loader's next batch; the optimizer step;
the eager code graph breaks leave (forward and its backward); the exposed collectives'
transfers, and apart from them the wait for the rank the others wait for; on
CPU the compiled graphs' own work; on CUDA the device (its kernels fill the step) or the
host (the device idle most of the step: Python and launches set the pace); and a training
job's evaluation where it holds most of the job's time. The largest is the verdict, where
it holds a fifth of the step or more; else the verdict is "none", with the largest parts."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace

from compilediag.analysis.step.advice import loop_step, loop_work_lines
from compilediag.harness.threads import Load, Threads, busy_cores, decide, user_setting
from compilediag.report.model import Breakdown, LoopLine, Report, Runtime
from compilediag.report.model import StepBound as Bound
from compilediag.report.step import BOUND_CLOSE
from compilediag.report.vocabulary import RecompileCause, RestKind, StepsAt
from compilediag.report.words import ms

# recompiles for another mode (grad mode, training): one graph each, none a CUDA graph's blocker
MODES = (RecompileCause.TRAINING, RecompileCause.GLOBAL)
DEVICE_BUSY = 0.5  # kernels this share of the kernel profile's step: the device bounds it
REAL_SHARE = 0.2  # a verdict names a part of at least this share of the step; else "none"
FEW_STEPS = 2  # a verdict over fewer measured steps is said to be one step's


def bound_of(report: Report, job: Runtime, b: Breakdown, cuda: bool) -> Bound | None:
    """The verdict, or None where the window measured no step; on CPU, where other
    processes kept the job's cores busy beside its threads, that its parts hold waits for
    a core (a look read "bound by compute" at 92 ms a step that took 3.3 ms on quiet cores)."""
    bound = _verdict(report, job, b, cuda)
    if bound is not None and not cuda:
        bound.why += "".join(f"; {x}" for x in contended(job))
    if bound is not None and b.calls < FEW_STEPS:
        # (a look: "bound by eager, 85%" from one step; two runs more: 11%, bound by compute)
        bound.why += (
            f"; from {b.calls} step alone, which a stall would fill: time {FEW_STEPS + 1} or "
            "more after the last compile"
        )
    return bound


def _verdict(report: Report, job: Runtime, b: Breakdown, cuda: bool) -> Bound | None:
    step = b.call_ms
    if not step:
        return None
    candidates = [
        _data(job, b), _optimizer(job, b), _eager(report, b), *_communication(job, b),
        _loop(job, b),
        _device_or_host(report, job, b) if cuda else _compute(report, b), _evaluation(job, b),
    ]  # fmt: skip
    found = sorted((c for c in candidates if c is not None and c.share > 0), key=lambda c: -c.share)
    # a rank that waits a fifth of its step for another is waiting, whatever holds the wait
    waiting = next((c for c in found if c.part == "waiting" and c.share >= REAL_SHARE), None)
    if waiting is not None:
        return waiting
    if not found or found[0].share >= REAL_SHARE:
        if len(found) > 1 and found[1].share >= BOUND_CLOSE * found[0].share:
            found[0].close, found[0].close_share = found[1].part, found[1].share
        return found[0] if found else None
    largest = ", ".join(f"{c.part} {c.share:.0%}" for c in found[:3])
    unseen = (
        "; the kernel profile (off: --no-kernels) would tell the device's share from the host's"
        if job.kernels_off and cuda else ""
    )  # fmt: skip
    return Bound(
        "none", found[0].share, found[0].ms,
        f"no part holds a real share of the step (a fifth or more); the largest: {largest}"
        + unseen,
    )  # fmt: skip


def _data(job: Runtime, b: Breakdown) -> Bound | None:
    if not b.data_ms:
        return None
    workers = job.loaders.get("workers", 0)
    how = "in the main process (num_workers=0)" if not workers else f"with {workers} workers"
    return Bound(
        "data", _share(b.data_ms, b), b.data_ms,
        f"the data loader's next batch: the step waits {ms(b.data_ms)} for it, loaded {how}",
    )  # fmt: skip


def _optimizer(job: Runtime, b: Breakdown) -> Bound | None:
    if not b.optimizer_ms:
        return None
    opts = job.optimizer_options
    how = (
        "fused" if opts.get("fused") else "a loop over the parameters (foreach=False)"
        if opts.get("foreach") is False else "foreach" if opts.get("foreach")
        else "torch's default implementation"
    )  # fmt: skip
    return Bound(
        "optimizer", _share(b.optimizer_ms, b), b.optimizer_ms,
        f"the optimizer step: {job.optimizer or 'the optimizer'}, {how}, {ms(b.optimizer_ms)}",
    )  # fmt: skip


def _eager(report: Report, b: Breakdown) -> Bound | None:
    backward = sum(g.backward_eager_ms or 0.0 for g in report.graphs)
    spent = b.between_graphs_ms + backward
    if b.eager_rest:  # the rest of a function torch did not resume after, in eager mode
        forward, backward = b.in_call_ms, b.eager_backward_ms or 0.0
        return Bound(
            "eager", _share(forward + backward, b), forward + backward,
            f"the eager code a graph break leaves: torch could not resume after it, so the "
            f"rest of {b.eager_rest} ran in eager mode: {ms(forward)} in forward"
            + (f", {ms(backward)} of backward outside the compiled graphs" if backward else ""),
        )  # fmt: skip
    if not spent:
        return None
    sites = len(report.graph_breaks)
    # a backend without AOTAutograd (backend="eager") compiles no backward graph: backward
    # runs whole, and what of it is the break's code is not told apart
    split = any(g.backward_ms is not None for g in report.graphs)
    back = f", {ms(backward)} of its backward" if split else (
        "; its backward is not split (the backend compiles no backward graphs), so not "
        "counted here"
    )  # fmt: skip
    return Bound(
        "eager", _share(spent, b), spent,
        f"the eager code graph breaks leave ({sites} site{'s' if sites != 1 else ''}): "
        f"{ms(b.between_graphs_ms)} in forward{back}",
    )  # fmt: skip


def _communication(job: Runtime, b: Breakdown) -> list[Bound | None]:
    """The collectives' exposed time (no compute beside it), a share of the kernel
    profile's step it was measured over (not the window's: the profiler stretches its
    steps). Where the window measured each rank's wait (waits.py), that wait is a part of
    its own, waiting for the rank the others wait for, a share of the window's step; the
    transfers are what the exposed share holds beyond it."""
    found: list[Bound | None] = [_waiting(job, b)]
    exposed = b.communication_exposed_ms
    if not exposed:
        return found
    basis = job.kernel_step_ms or b.call_ms
    over = f"of the kernel profile's step of {ms(basis)}"
    if b.communication_wait_ms is None:
        return [_of_profile("communication", exposed, basis, b, lambda share: (
            f"collectives with no compute beside them: {ms(exposed)} a step exposed, "
            f"{share:.0%} {over} (waits for other ranks included)"
        ))]  # fmt: skip
    transfer_share = exposed / basis - _wait_share(b)
    if transfer_share > 0:
        # (in the figures the report prints: a look could not make 42% of them)
        apart = (
            f"{exposed / basis:.0%} exposed, less the {_wait_share(b):.0%} of the window's step "
            "spent waiting for other ranks"
        )
        found.append(_of_profile("communication", transfer_share * basis, basis, b, lambda s: (
            f"collectives' transfers with no compute beside them: {s:.0%} {over} ({apart})"
        )))  # fmt: skip
    return found


def _waiting(job: Runtime, b: Breakdown) -> Bound | None:
    """The wait for the rank the others wait for, measured in the window's own steps."""
    waiting = next((s for s in job.rank_steps if s.rank == job.window_rank), None)
    wait = b.exposed_wait_ms
    if not wait or waiting is None or waiting.waits_for is None:
        return None
    rank = waiting.waits_for
    how = (
        "the device's time of each"
        if job.wait_method == "durations"
        else "when each rank came to each"
    )
    return Bound(
        "waiting", _share(wait, b), wait,
        f"waiting for rank {rank} in the collectives: {ms(wait)} of a {ms(b.call_ms)} step "
        f"(the window's steps, by torch's records of its collectives: {how}); what rank "
        f"{rank} does longer is under Ranks wait",
    )  # fmt: skip


def _of_profile(
    part: str, spent: float, basis: float, b: Breakdown, why: Callable[[float], str]
) -> Bound:
    """A part measured over the kernel profile's steps (`spent` ms of its `basis` ms step):
    its share of that step, and as much of the window's step."""
    share = min(1.0, spent / basis)
    return Bound(part, round(share, 4), round(share * b.call_ms, 6), why(share))


def _wait_share(b: Breakdown) -> float:
    """The share of the window's step this rank waited for another."""
    return min(1.0, b.exposed_wait_ms / b.call_ms) if b.call_ms else 0.0


def _loop_share(job: Runtime, b: Breakdown, every: bool = False) -> tuple[LoopLine | None, float]:
    """The loop's costliest line of its own work, and the share of the window's step it
    takes (`every`: all such lines take) of the step they were timed in."""
    lines = loop_work_lines(job, b)
    if not lines or not b.call_ms:
        return None, 0.0
    top = max(lines, key=lambda x: x.ms)
    spent = sum(x.ms for x in lines) if every else top.ms
    return top, max(0.0, min(1.0, spent / loop_step(job, b)))


def _loop(job: Runtime, b: Breakdown) -> Bound | None:
    """Host work the loop does itself, at the user's line (loop_work_lines: timed by line
    events on the loop's code in the window's steps)."""
    top, share = _loop_share(job, b)
    if top is None or not share:
        return None
    return Bound(
        "loop", round(share, 4), round(share * b.call_ms, 6),
        f"the loop's own work: {top.named} takes {ms(top.ms)} of the {ms(loop_step(job, b))} "
        "the loop's lines took a step (by the job's clock at each line)",
    )  # fmt: skip


def _compute(report: Report, b: Breakdown) -> Bound | None:
    """On CPU: the compiled graphs' own work, forward and backward."""
    backward = sum(g.backward_ms or 0.0 for g in report.graphs)
    spent = b.in_graphs_ms + backward
    if not spent:
        return None
    # (a look read "forward and backward graphs" of a job that ran no backward)
    graphs = (
        "forward and backward graphs" if backward
        else "forward graphs" if b.backward_ms else "forward graphs: no backward was seen"
    )  # fmt: skip
    return Bound(
        "compute", _share(spent, b), spent,
        f"the compiled graphs' own work: {ms(spent)} a step ({graphs})",
    )  # fmt: skip


def contended(job: Runtime) -> list[str]:
    """Where torch's threads in the job and what other processes kept busy on its cores
    while it ran were more than the cores: the step's figures flagged, the cause and the
    fix (harness.threads' rule, as explain's timings have it); [] where not read."""
    if job.beside_cores is None or len(job.window_load) < 3 or not job.window_load[2]:
        return []
    loadavg, cores, threads = job.window_load[:3]
    user = user_setting(os.environ)  # (a report before the job's own was kept: this one's)
    if len(job.window_load) > 3:  # the setting the job's own environment had
        user = f"OMP_NUM_THREADS={job.window_load[3]:.0f}" if job.window_load[3] else ""
    chosen = decide(int(threads), Load(int(cores), job.beside_cores, -1.0, loadavg), user)
    ran = Threads(int(threads), int(threads), "you" if user else "torch", False, None, user)
    # the job's own count, as it ran; the count the free cores would take beside it
    return busy_cores(
        replace(ran, oversubscribed=chosen.oversubscribed, load=chosen.load, fits=chosen.used),
        "step",
    )


def _device_or_host(report: Report, job: Runtime, b: Breakdown) -> Bound | None:
    """On CUDA: the kernels' busy time a step (the device's own time, which torch.profiler
    does not stretch) against the step the job's clock measured in the window (the kernel
    profile's own steps are stretched by the profiler's host-side work: an H100 step of
    2.5 ms took 5 ms under it)."""
    t = report.timings
    step = b.call_ms
    if t is None or not t.kernels or not step:
        return None
    busy = sum(k.ms for k in t.kernels if k.kind != "communication")
    # the device idle while a collective waits for another rank is that wait's, not the
    # host's (both the window's)
    wait = step * _wait_share(b)
    _, loop = _loop_share(job, b, every=True)  # the loop's own work: a candidate of its own
    waited = wait + step * loop
    if busy >= DEVICE_BUSY * step:
        top = max(t.kernels, key=lambda k: k.lost_ms)
        return Bound(
            "device", min(1.0, busy / step), busy,
            f"the device: its kernels run {ms(busy)} of a {ms(step)} step; the one losing most "
            f"against the peak: {top.name}",
        )  # fmt: skip
    idle = max(0.0, 1 - (busy + waited) / step)
    # what is set apart, said as what it is (one process waits for no other rank)
    which = " and ".join(
        w for w, x in (("waiting for another rank", wait), ("in the loop's own work", loop)) if x
    )
    apart = f", {ms(waited)} {which} apart" if waited else ""
    return Bound(
        "host", round(idle, 4), max(0.0, step - busy - waited),
        f"the host: the device is idle {idle:.0%} of the step (its kernels run {ms(busy)} of "
        f"{ms(step)}{apart}): Python and kernel launches set the pace",
    )  # fmt: skip


def _evaluation(job: Runtime, b: Breakdown) -> Bound | None:
    """A training job's evaluation, where it holds more of the job's time than any part
    of its training steps: its time over the job against the training steps'. One whose
    every occurrence compiled is left out: its time is the compile's (said with the
    compile), not a cost every evaluation pays."""
    spent = sum(
        w.ms * len(w.steps) for w in job.other_work if w.kind == "evaluation" and not w.compiled
    )
    if not spent or not job.steps:
        return None
    training = b.call_ms * job.steps
    return Bound(
        "evaluation", spent / (spent + training), spent / job.steps,
        f"evaluation: {ms(spent)} over the job against {ms(training)} of training steps",
    )  # fmt: skip


def _calls_a_step(report: Report, job: Runtime) -> int:
    """How many times a step calls the model: the probe's tally of its calls (a GAN's
    discriminator, called on the real batch, the fake one and the fake one again for the
    generator's gradient, in two graphs: 3); in a report without it, its training graphs'
    calls over the optimizer's steps, the most (1 where steps are counted at the calls
    themselves)."""
    if job.steps_at != StepsAt.OPTIMIZER or not job.steps:
        return 1
    if job.model_calls is not None:
        return job.model_calls
    calls = [g.calls for g in report.graphs if g.calls and not g.evaluation]
    return round(max(calls) / job.steps) if calls else 1


def _share(part_ms: float, b: Breakdown) -> float:
    return round(min(1.0, part_ms / b.call_ms), 4) if b.call_ms else 0.0


def bound_advice(report: Report, job: Runtime) -> list[str]:
    """What the verdict says to do first, where no part's own advice says it: a host-bound
    CUDA step gets CUDA graphs, with what stands in their way in this job."""
    b = job.bound
    if b is None or b.part != "host":
        return []
    blockers = []
    if report.graph_breaks:
        n = len(report.graph_breaks)
        blockers.append(
            f"the {n} graph break site{'s' if n != 1 else ''} (each splits the step into "
            "separate CUDA graphs, with eager code between them): remove them first"
        )
    shapes = [r for r in report.recompiles if r.cause not in MODES]
    if shapes:
        blockers.append(
            "its recompiles (each shape or value records a CUDA graph of its own): mark the "
            "changing dims dynamic or pad to a few sizes"
        )
    t = report.timings
    reads = [r for r in (t.breakdown.rest if t and t.breakdown else []) if r.kind == RestKind.SYNC]
    if reads:
        blockers.append(
            f"its waits for the device each step ({', '.join(r.name for r in reads[:2])}: "
            ".item(), float(), torch.cuda.synchronize()): read values every N steps"
        )
    if job.cudagraph_skips:
        blockers.append(f"torch ran {job.cudagraph_skips} graph(s) without a CUDA graph (below)")
    micro = _calls_a_step(report, job)
    if micro >= 2:
        blockers.append(
            f"its {micro} calls of the model a step: each CUDA-graph replay overwrites the "
            "outputs of the call before it, and the gradients autograd kept from its backward: "
            "give each parameter a .grad of its own before the step's first call (p.grad = "
            "torch.zeros_like(p), then opt.zero_grad(set_to_none=False)), call "
            "torch.compiler.cudagraph_mark_step_begin() where each micro-step (or iteration) "
            "begins, never between a call and its backward, and clone an output you keep past "
            "it"
        )
    said = (
        f"the device is idle {b.share:.0%} of the step, waiting for the host to launch its "
        f"kernels: CUDA graphs launch them all at once - torch.compile(model, "
        'mode="reduce-overhead")'
    )
    if blockers:
        said += "; in this job, first: " + "; ".join(blockers)
    return [said + "."]
