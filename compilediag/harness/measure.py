"""Measuring in the worker: eager against compiled per call (wall time; the GPU's busy time
on CUDA), the output check, and the inputs each variant gets (its own copy). Runs in the
worker process; torch is passed in, never imported at module level. The checks of a call
(inputs, outputs) are `checks.py`; the profiler's regions and Python frames `profiling.py`."""

from __future__ import annotations

import dataclasses
import gc
import math
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from compilediag.harness.checks import (
    fresh,
    sync,
)
from compilediag.harness.device_time import Step, device_time
from compilediag.harness.phases import AGAIN
from compilediag.harness.profiling import NO_GRAPH_EVENTS, profile_regions, python_frames
from compilediag.harness.threads import Trust, Watch, busy_cores
from compilediag.harness.worker_types import (
    FrameTime,
    Measured,
    WorkerSpec,
)
from compilediag.report.model import Stat
from compilediag.report.words import plural

# Shortest timed block of back-to-back calls: a block that switches between eager and
# compiled every few calls times a launch-bound model cold (caches, allocator, branch
# predictors), so each block runs one variant long enough to be warm.
BLOCK_MS = 50.0
WARMUP_S_CPU = 0.2  # untimed calls before measuring, per variant
WARMUP_S_CUDA = 1.0
# a round planned at about a second per variant ends after ROUND_CAP_S where the calls
# turn out far slower than probed (never where the user set --repeat), with at least
# MIN_BLOCKS blocks per variant; a block over LONG_BLOCK x BLOCK_MS shrinks the next ones
ROUND_CAP_S = 6.0
MIN_BLOCKS = 5
LONG_BLOCK = 4


def measure(
    torch: Any,
    step: Step,
    model: Any,
    compiled: Any,
    call: Any,
    device: str,
    spec: WorkerSpec,
    fresh_each_call: bool = False,
    trust: Trust | None = None,
    progress: Callable[[str], None] = lambda s: None,
    watch: Watch | None = None,
) -> Measured:
    """Steady-state time per call of eager and compiled, in milliseconds (steady_state()),
    then, on CPU, the flag of busy cores (`trust` holds the threads the timing runs with
    and gets the load `watch` saw beside the timing, and what it flags), the device's time (CUDA) and where a compiled
    call's time goes. The profilers go last: a process that has run torch.profiler times
    its later calls slower, and its device time longer (docs/benchmarks.md). `progress`
    is told each phase and block."""
    cuda = device.startswith("cuda")

    def args_for(calls: int) -> list[Any]:
        # a model that changes its inputs gets a fresh copy for every call, made before
        # the clock starts
        return [fresh(call) for _ in range(calls)] if fresh_each_call else [call] * calls

    progress("timing eager vs compiled: warming up")
    cap = ROUND_CAP_S if spec.repeat is None else None
    e, c, repeat, per_block, warmup = steady_state(
        torch, step, model, compiled, args_for, cuda, spec, _rounds(progress, 1), cap
    )
    again = dataclasses.replace(spec, warmup=3, repeat=repeat)
    made = [1]

    def another() -> tuple[Stat, Stat]:
        made[0] += 1
        told = _rounds(progress, made[0])
        return steady_state(torch, step, model, compiled, args_for, cuda, again, told, cap)[:2]

    e, c, rounds = settled((e, c), another)
    if trust is not None and trust.threads is not None and not cuda:
        # No one-thread cross-check: a compiled call under another thread count fails
        # Dynamo's global-state guard and recompiles (the user's findings would change).
        if watch is not None:
            trust.threads = watch.judged(trust.threads)
        trust.flags = busy_cores(trust.threads)
    noise = all_noise(torch, e, c, rounds, trust.flags if trust is not None else [])
    busy = None
    if cuda:
        progress("timing: the GPU's own time")
        busy = device_time(torch, step, model, compiled, call, args_for)
    profiled = None
    if spec.backend not in NO_GRAPH_EVENTS:
        progress("timing: profiling where a compiled call's time goes")
        try:
            profiled = profile_regions(torch, lambda a: step(compiled, a), args_for, c.median, cuda)
        except Exception:  # noqa: BLE001 - a breakdown is extra: never lose the timings for it
            profiled = None
    eager_frames: list[FrameTime] = []
    frames = torch._dynamo.utils.counters["frames"]
    if frames["total"] > frames["ok"]:  # torch gave up a frame: it runs in eager mode
        try:
            eager_frames = python_frames(lambda a: step(compiled, a), args_for, c.median)
        except Exception:  # noqa: BLE001 - as above
            pass
    return Measured(
        eager_ms=e,
        compiled_ms=c,
        device=busy,
        profiled=profiled,
        python_ms=eager_frames,
        speedup=e.median / c.median if c.median > 0 else None,
        repeat=repeat,
        calls_per_block=per_block,
        warmup=warmup,
        method="CUDA events" if cuda else "perf_counter",
        noise=noise,
    )


# a measurement whose blocks spread this much is measured again, up to NOISE_ROUNDS in
# all; still so, its figures are printed as unreliable, with the likely reason. The spread
# is the IQR as a share of the median, or the median's distance from the fastest block as
# a share of FAR_MIN of the median (a median 1.5x the fastest block reads as NOISY): one
# fast block alone is no noise, a median far above most blocks' best is
NOISY = 0.25
FAR_MIN = 1 / 3
NOISE_ROUNDS = 3


def spread(*stats_: Stat) -> float:
    """The worst relative spread of the variants' blocks (NOISY and above: noisy)."""
    worst = 0.0
    for s in stats_:
        if s.median > 0:
            far = (1 - (s.min or s.median) / s.median) / FAR_MIN * NOISY
            worst = max(worst, s.iqr / s.median, far)
    return worst


def settled(
    first: tuple[Stat, Stat], again: Callable[[], tuple[Stat, Stat]]
) -> tuple[Stat, Stat, int]:
    """Eager's and compiled's figures, measured again (`again`) while their blocks spread
    (NOISY), up to NOISE_ROUNDS in all: the round that spread least, and the rounds made."""
    e, c = first
    rounds = 1
    while spread(e, c) > NOISY and rounds < NOISE_ROUNDS:
        e2, c2 = again()
        rounds += 1
        if spread(e2, c2) < spread(e, c):
            e, c = e2, c2
    return e, c, rounds


def _rounds(progress: Callable[[str], None], n: int) -> Callable[[int, int], None]:
    """steady_state's progress (block i of n) as a line: the round, the block."""
    of = f", round {n} of {NOISE_ROUNDS} {AGAIN}" if n > 1 else ""

    def told(i: int, total: int) -> None:
        progress(f"timing eager vs compiled: block {i} of {total}{of}")

    return told


def all_noise(torch: Any, eager: Stat, compiled: Stat, rounds: int, flags: list[str]) -> str:
    """The busy cores' flags, then the spread's reason (the machine's load said once)."""
    spreads = noise_reason(torch, eager, compiled, rounds, bool(flags))
    return "; ".join([*flags, *([spreads] if spread(eager, compiled) > NOISY else [])])


def noise_reason(
    torch: Any, eager: Stat, compiled: Stat, rounds: int, load_said: bool = False
) -> str:
    """Why the timings can't be trusted, in words: the machine's load (unless `load_said`),
    torch's threads against the cores this process may use, or else the spread itself."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cores = cores or 1
    threads = torch.get_num_threads()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    worst = max((eager, compiled), key=lambda s: spread(s))
    varied = (
        f"{'compiled' if worst is compiled else 'eager'}'s blocks spread (IQR "
        f"{worst.iqr / worst.median:.0%} of the median, the fastest "
        f"{1 - (worst.min or worst.median) / worst.median:.0%} below it) after {plural(rounds, 'round')}"
    )
    if load > min(threads, cores) + 1 and not load_said:
        return f"the machine was busy (load {load:.1f} on {cores} cores); {varied}"
    if threads > cores:
        return f"torch runs {threads} threads on {cores} cores; {varied}"
    return varied


def steady_state(
    torch: Any, step: Step, model: Any, compiled: Any,
    args_for: Callable[[int], list[Any]], cuda: bool, spec: WorkerSpec,
    progress: Callable[[int, int], None] = lambda i, n: None,
    cap_s: float | None = None,
) -> tuple[Stat, Stat, int, int, int]:  # fmt: skip
    """Eager and compiled wall time per call: (eager, compiled, blocks, calls per block,
    warm-up calls).

    Calls are timed in blocks of back-to-back calls (enough for a block to last BLOCK_MS),
    so a launch-bound GPU model is measured with its launch queue full, as it runs in a
    loop, and host timer resolution does not matter. Blocks of eager and compiled
    alternate, and which goes first alternates too. On CUDA each block is bracketed by
    CUDA events and synchronised before it is read. `progress` is told each pair of
    blocks (between blocks, never inside one). `cap_s`: a round that runs longer ends
    there (after MIN_BLOCKS pairs); the blocks made are the count returned.
    """
    block = _block_timer(torch, step, args_for, cuda)
    warmup = _warm_up(block, model, compiled, spec.warmup, cuda)
    sync(torch, "cuda" if cuda else "cpu")
    probe = max(block(model, 1), block(compiled, 1), 1e-3)
    per_block = max(1, math.ceil(BLOCK_MS / probe))
    repeat = spec.repeat
    if repeat is None:
        # about a second of measurement per variant, within [10, 200] blocks
        repeat = int(min(200, max(10, 1000.0 / (probe * per_block))))
    eager, comp, per_block = _alternate(block, model, compiled, per_block, repeat, progress, cap_s)
    return stats(eager), stats(comp), len(eager), per_block, warmup


Block = Callable[[Any, int], float]  # (the model or the compiled one, calls) -> ms a call


def _block_timer(torch: Any, step: Step, args_for: Callable[[int], list[Any]], cuda: bool) -> Block:
    """A block of back-to-back calls timed: on CUDA by events, else by the host's clock."""

    def block(fn: Any, calls: int) -> float:
        args = args_for(calls)
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for a in args:
                step(fn, a)
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / calls
        t0 = time.perf_counter()
        for a in args:
            step(fn, a)
        return (time.perf_counter() - t0) * 1e3 / calls

    return block


def _warm_up(block: Block, model: Any, compiled: Any, warmup: int | None, cuda: bool) -> int:
    """Untimed calls of each variant, the user's count or by time; the calls made."""
    if warmup is None:
        # Warm up by time, not count: a GPU idle during the compile has dropped its clocks,
        # and it takes a good fraction of a second of work to bring them back.
        warmup, deadline = 0, time.perf_counter() + (WARMUP_S_CUDA if cuda else WARMUP_S_CPU)
        while warmup < 3 or time.perf_counter() < deadline:
            block(model, 1)
            block(compiled, 1)
            warmup += 1
    else:
        for _ in range(warmup):
            block(model, 1)
            block(compiled, 1)
    return warmup


def _alternate(
    block: Block, model: Any, compiled: Any, per_block: int, repeat: int,
    progress: Callable[[int, int], None], cap_s: float | None,
) -> tuple[list[float], list[float], int]:  # fmt: skip
    """The timed blocks, eager's and compiled's in turn (which goes first alternating), with
    the collector off: each variant's ms a call, and the calls per block at the end."""
    eager: list[float] = []
    comp: list[float] = []
    started = time.perf_counter()
    gc.collect()
    gc.disable()  # as timeit does: a collection inside a block is not the model's time
    try:
        for i in range(repeat):
            progress(i + 1, repeat)
            t0 = time.perf_counter()
            if i % 2:
                comp.append(block(compiled, per_block))
                eager.append(block(model, per_block))
            else:
                eager.append(block(model, per_block))
                comp.append(block(compiled, per_block))
            # A call far slower than the probe said (threads waiting on busy cores: 0.1 ms
            # probed, 30 ms a call after) makes a block of minutes: the next blocks get
            # the calls that last BLOCK_MS now, and a round that still runs long ends
            # after MIN_BLOCKS (unless the user set --repeat).
            took = (time.perf_counter() - t0) * 1e3 / (2 * per_block)
            if took * per_block > LONG_BLOCK * BLOCK_MS:
                per_block = max(1, math.ceil(BLOCK_MS / took))
            if cap_s is not None and len(eager) >= MIN_BLOCKS:
                if time.perf_counter() - started > cap_s:
                    break
    finally:
        gc.enable()
    return eager, comp, per_block


def stats(samples: list[float]) -> Stat:
    """The blocks' median, spread (IQR; 0 for one block, `--repeat 1`: none to give) and
    fastest."""
    q = statistics.quantiles(samples, n=4, method="inclusive") if len(samples) > 1 else [0.0] * 3
    return Stat(
        median=statistics.median(samples), iqr=q[2] - q[0], n=len(samples), min=min(samples)
    )
