"""The Report: one typed, serialisable tree that every renderer and the gate read.

`Report.to_dict()` is the JSON contract (`--format json`); `Report.from_dict()` reads it
back, so `compilediag render report.json` needs no model run and no torch.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any

from compilediag.report.vocabulary import (
    Bound,
    BreakCause,
    CallState,
    Finding,
    FixOutcome,
    FixSource,
    KernelKind,
    RecompileCause,
    RestKind,
    Source,
    StepsAt,
)

# 2: timings.device became timings.device_ms; `runtime`, `rank_groups` and each finding's
# `ranks` were added. 3: notes, errors and divergence became Findings (they were text).
# 4: a multi-rank report's summary gives what one rank compiled (the worst rank's figures,
# their spread over ranks in `per_rank`), no longer sums over ranks; sums are `total_*`.
# Older reports load through report_migrations.
SCHEMA_VERSION = 5
VERSION = "0.1.0"  # compilediag's own, as every report names it (`tool.version`)


@dataclass
class Environment:
    """Where the findings come from: a compilediag run, a trace made elsewhere, or a
    test's own process (`compilediag.testing`)."""

    source: Source = Source.RUN
    torch: str = "?"
    python: str = ""
    device: str = ""
    device_name: str = ""
    backend: str = ""
    mode: str = "default"
    dynamic: bool | None = None
    train: bool = False
    triton: str = ""
    files: int = 0  # trace files read (source trace)
    cold: bool = False  # compiled with private, empty caches (--cold)


@dataclass
class TargetInfo:
    """What was diagnosed: the model file (or trace path) and the inputs of each call."""

    path: str = ""
    attr: str | None = None
    inputs: list[str] = field(default_factory=list)
    params: list[str] = field(default_factory=list)  # the names forward gives its inputs
    repeated: Repeated | None = None  # the model's largest run of identical blocks


@dataclass
class Repeated:
    """Identical blocks the model runs (the children of one container, one class each):
    regional compilation compiles one block's code instead of the whole model."""

    path: str  # the container, from the model: `blocks`, `transformer.h`
    cls: str
    count: int


@dataclass
class SourceLine:
    line: int
    code: str


@dataclass
class Site:
    """A place in source code."""

    file: str
    line: int
    code: str = ""
    name: str = ""


@dataclass
class GraphBreak:
    """One graph-break site, de-duplicated across compiles and recompiles."""

    file: str
    line: int
    code: str
    reason: str  # torch's short name for the cause (its gb_type where it has one)
    gb_id: str | None = None
    doc_url: str | None = None
    explanation: str = ""
    hints: list[str] = field(default_factory=list)
    count: int = 1
    suggestion: str = ""
    cause: BreakCause = BreakCause.OTHER  # what the break is, by our rules
    library_frame: Site | None = None  # where it broke, when inside a library the user called
    framework: str = ""  # the framework that library frame belongs to (DDP, logging, ...)
    library: str = ""  # the package whose line broke (torchvision, transformers); '' if yours
    fix_source: FixSource | None = None
    compile_ids: list[str] = field(default_factory=list)
    # per compiled call: the eager time around the graphs this break ended, and its share of
    # the call (from torch.profiler; None when not measured)
    time_lost_ms: float | None = None
    time_lost_share: float | None = None
    backward_lost_ms: float | None = None  # run, in training: the part of it in backward
    ops_before: int = 0  # ops in the graph this break cut short
    context: list[SourceLine] = field(default_factory=list)  # the lines around the site
    ranks: list[int] = field(default_factory=list)  # several ranks: those with it (in ranks[])


@dataclass
class GuardChange:
    """A size guard that failed, as data: dim `dim` of `source` was `old`, is `new`."""

    source: str  # as the report names it (`x`, `input_ids`, `model_kwargs['position_ids']`)
    dim: int
    old: int
    new: int


@dataclass
class Recompile:
    frame: str
    file: str
    line: int
    compile_id: str
    reasons: list[str] = field(default_factory=list)  # torch's text, one per failed guard
    failed_guard: str = ""  # the first, in words
    suggestion: str = ""
    failed_guards: list[str] = field(default_factory=list)  # all, in words
    cause: RecompileCause = RecompileCause.OTHER
    guard_file: str = ""  # the user line that installed the guard
    guard_line: int = 0
    guard_code: str = ""  # the source of that line, read when the report was built
    automatic_dynamic: bool = False  # torch made the changed value dynamic on this recompile
    hit_limit: bool = False  # the attempt that hit the recompile limit: no graph, not counted
    ranks: list[int] = field(default_factory=list)  # several ranks: those with it (in ranks[])
    change: GuardChange | None = None  # the first failed guard, where it is a size's
    # beyond the first failed guard (torch names one): what else the call changed, in words
    also_changed: list[str] = field(default_factory=list)


@dataclass
class CompileFailure:
    """torch.compile failed on a frame (a backend error, an internal Dynamo error, ...):
    the frame ran in eager mode, or the program stopped."""

    compile_id: str
    frame: str
    file: str
    line: int
    fail_type: str  # torch's name for it: BackendCompilerFailed, InternalTorchDynamoError, ...
    reason: str
    code: str = ""  # the user line torch blamed
    fix: str = ""
    by: str = "torch.compile"  # or "torch.export": what failed


@dataclass
class LimitHit:
    """Dynamo's recompile limit was reached: later calls of the frame run in eager mode."""

    frame: str
    file: str
    line: int
    limit: int
    compiles: int
    distinct_reasons: list[str] = field(default_factory=list)
    compile_id: str = ""  # the compile that hit the limit


@dataclass
class Call:
    """One call of the sweep: did it reuse a cached graph or compile?"""

    index: int
    inputs: str
    compiled: bool
    compile_ids: list[str] = field(default_factory=list)
    state: CallState | None = None
    compile_time_s: float = 0.0
    wall_s: float = 0.0


@dataclass
class Graph:
    compile_id: str
    frame: str
    file: str
    line: int
    ops: int
    compile_time_s: float | None = None
    # per compiled call, from torch.profiler (Inductor): in this graph, and in this frame's
    # Python outside it (the break that ended it, guards, calling the next frame)
    time_ms: float | None = None
    eager_ms: float | None = None
    # `compilediag run` in training, per step: its backward graph, and the eager backward
    # of the code after it (the region its break left eager)
    backward_ms: float | None = None
    backward_eager_ms: float | None = None
    calls: int | None = None  # `compilediag run`: how many times the job ran it
    ranks: list[int] = field(default_factory=list)  # several ranks: those with it (in ranks[])
    # graphs of this compile the backend was handed before torch restarted it (discarded;
    # their time is in compile_time_s): torch's CompileCounter counts them too
    discarded: int = 0
    # its compile by phase (CompileTime's names: dynamo_s, aot_s, inductor_s, codegen_s,
    # backward_s; kernel_compile_s within them), those torch timed
    phases: dict[str, float] = field(default_factory=dict)
    # `run` of several ranks: only its ranks' evaluation calls it (the same id on another
    # rank can be that rank's training graph: a row of its own)
    evaluation: bool = False


@dataclass
class Kernel:
    name: str
    kind: KernelKind
    file: str = ""  # written file, when dumped
    ops: list[str] = field(default_factory=list)
    source_lines: list[str] = field(default_factory=list)
    compile_id: str = ""
    lines: int = 0
    # the submodules whose parameters it uses, by path: `body.0 (Conv2d)` (the class where
    # the model was at hand; a trace alone gives the path)
    modules: list[str] = field(default_factory=list)


@dataclass
class Stat:
    median: float
    iqr: float
    n: int = 0
    min: float | None = None  # the fastest block: the least noisy estimate of the cost
    # explain on CPU: the same call's cost on one thread (its CPU time per call, or its
    # fastest one-thread block where lower); a median more than 3x this is flagged
    # (Timings.noise)
    one_thread_ms: float | None = None


@dataclass
class DeviceTime:
    """The GPU's time per call (no CPU overhead), in milliseconds: back-to-back calls
    captured in one CUDA graph and replayed, else the kernels' busy time (`method` says
    which)."""

    eager_ms: float
    compiled_ms: float
    method: str = ""


@dataclass
class RestPart:
    """An op a `compilediag run` step ran outside its forward, backward, optimizer and data,
    outside any compiled graph (over the kernel profile's steps): the loss or a metric
    computed eagerly, a tensor's value read in Python (.item(): on CUDA a wait for the
    device), a copy."""

    name: str  # torch.profiler's: aten::_local_scalar_dense, aten::mm, cudaDeviceSynchronize
    kind: RestKind
    what: str  # in words
    calls: float  # a step
    ms: float  # a step (on CUDA the CPU's time: the wait in a sync included)


@dataclass
class Breakdown:
    """A compiled call's time, or a `compilediag run` job's step, in parts that add up to
    `call_ms`: explain's are the profiler's shares of a call, applied to the timed call (the
    compiled median); run's are the window's steps, each moment given to one part."""

    call_ms: float
    in_graphs_ms: float  # forward graphs
    between_graphs_ms: float  # the eager Python between two graphs of one compiled call
    outside_ms: float  # what remains
    calls: int  # profiled
    profiled_call_ms: float = 0.0  # the same call under the profiler (its overhead in it)
    backward_ms: float = 0.0  # run: backward, its compiled graphs and the eager rest
    optimizer_ms: float = 0.0  # run: the optimizer step
    data_ms: float = 0.0  # run: the data loader's next batch
    evaluation_ms: float = 0.0  # run: evaluation, where every measured step held one
    # run, a job with collectives: their time a step (NCCL's kernels on CUDA, gloo's
    # operations on CPU) over the kernel profile's steps (those after the window), the wait
    # for the other ranks in it; on a stream or thread of their own, alongside the parts
    # above, so not one of them
    communication_ms: float | None = None
    # ... of it, exposed: the time no compute ran beside a collective (the step waits on it;
    # the rest overlaps compute); None where not measured
    communication_exposed_ms: float | None = None
    # ... of it, the wait for the rank that arrived last (each call's time beyond the same
    # call's on that rank, which waited for nobody); the rest is the transfer. None: one
    # rank, or a file that kept no call's own time
    communication_wait_ms: float | None = None
    # run: what the rest holds that the kernel profile named (over its steps, after the
    # window): eager ops outside any graph and reads of a tensor's value; the rest's
    # other time is Python (logging, the loop's own code)
    rest: list[RestPart] = field(default_factory=list)

    def parts(self) -> list[tuple[str, float]]:
        """The step's parts in the order they run, those it has (a training step's
        backward, optimizer and data; every step's forward and the rest): (name, ms), adding
        up to it."""
        parts = [
            ("forward", self.in_graphs_ms + self.between_graphs_ms),
            ("backward", self.backward_ms),
            ("optimizer", self.optimizer_ms),
            ("data", self.data_ms),
            ("evaluation", self.evaluation_ms),
        ]
        return [(n, v) for n, v in parts if v or n == "forward"] + [("the rest", self.outside_ms)]

    @property
    def exposed_wait_ms(self) -> float:
        """Of the collectives' time, the wait for another rank with no compute beside it (the
        wait is exposed first: a rank that waits has nothing to run); 0 where not known."""
        return min(self.communication_wait_ms or 0.0, self.communication_exposed_ms or 0.0)

    def rest_holds(self, profiled_ms: float) -> bool:
        """Whether ops the kernel profile timed in the rest (`profiled_ms` a step) fit in
        the rest the job's clock measured, within 25% and 0.05 ms (the two are taken over
        other steps): where they don't, torch.profiler made that time (on CPU it inflates
        what follows a compiled region), and it is no part of this step."""
        return profiled_ms <= self.outside_ms * 1.25 + 0.05


@dataclass
class RankStep:
    """One rank's window in a `compilediag run` of several ranks: its step in parts, and
    the steps around the window, timed once each (their median)."""

    rank: int
    breakdown: Breakdown
    unprofiled_step_ms: float | None = None
    # the median over the window's steps of the step and of each part (one slow step, a
    # pause or a log written once, moves a mean, not these)
    medians: dict[str, float] = field(default_factory=dict)
    kernel_step_ms: float | None = None  # the kernel profile's step, its collectives' basis
    waits_for: int | None = None  # the rank that arrived last at most of its collectives
    loop: list[LoopLine] = field(default_factory=list)  # its loop's lines, a step


@dataclass
class LoopLine:
    """A line of the training loop and what it spent a step, over the kernel profile's
    steps (Python's profiler on the loop): where host work a profiler names only by its ops
    is the user's."""

    file: str
    line: int
    ms: float  # a step
    loop: str = ""  # the function the loop runs in
    # the function the line called: '' for the loop's own Python, LOOP_TORCH for torch's
    # (the model's call, backward, the optimizer's step; '' too in files before it)
    calls: str = ""
    source: str = ""  # the line's text

    @property
    def own_work(self) -> bool:
        """Work the loop does itself: a function of the user's or a library's it calls, or
        its own Python; not torch's (the model, backward, the optimizer)."""
        return self.calls != LOOP_TORCH

    @property
    def named(self) -> str:
        """`get_batch (train.py:57)`, `train.py:57 (the loop's own Python)`."""
        if self.calls and self.calls != LOOP_TORCH:
            return f"{self.calls} ({self.file}:{self.line})"
        if not self.calls:
            return f"{self.file}:{self.line} (the loop's own Python)"
        return f"{self.file}:{self.line}"


LOOP_TORCH = "<torch>"  # the probe's word for a loop line that called torch (loop_work.py)


@dataclass
class StepWork:
    """Work a training job did in some of its steps that is not training: an evaluation
    (calls of the compiled model under no_grad, inference_mode or eval mode), named by the
    function that ran it. Its steps are left out of the training step's figures."""

    kind: str  # "evaluation"
    function: str
    file: str
    line: int
    steps: list[int] = field(default_factory=list)  # the job's steps it ran in
    ranks: list[int] = field(default_factory=list)  # the ranks that ran it ([]: one process)
    ms: float = 0.0  # its own time, the median occurrence (host: first call to last call end)
    calls: float = 0.0  # compiled-model calls, the median occurrence
    # the ranks that did not run it and waited for it (in their collectives), the median of
    # their extra time in the window's steps that held it: {"1": 120.5}
    waited_ms: dict[str, float] = field(default_factory=dict)
    compiled: bool = False  # torch compiled during every occurrence: `ms` is mostly the compile


@dataclass
class StepBound:
    """What bounds a `compilediag run` step (analysis/step/verdict.py): the part (data, optimizer,
    eager, communication, compute, device, host, evaluation), its share of the step, its
    time a step, and why, in words."""

    part: str
    share: float
    ms: float
    why: str


@dataclass
class Tried:
    """A remedy `run --try-fixes` made in runs of its own (no edit of the user's code),
    alternated with the job's unchanged runs and measured by the job's step over the same
    window: the setting in code, where the user's code makes the object it changes, the
    step and the part it targets before and after (each run's window mean, the median over
    the runs), the effect on the step (after/before, a ratio of the windows) with its 95%
    interval over the pairs of runs, breaks and recompiles before and after, whether the losses of the
    window's steps matched (None: not compared), and whether it is kept (the whole interval
    at least 5% faster, and nothing got worse), with why."""

    remedy: str  # foreach, fused, workers, scalars, cudagraphs, tf32; "all kept": together
    code: str  # the change, as the user writes it
    where: str = ""  # file:line of the object changed ("" for a setting)
    step_ms: float | None = None
    step_ms_after: float | None = None
    part: str = ""  # the part of the step it targets (data, optimizer, eager, ...)
    part_ms: float | None = None
    part_ms_after: float | None = None
    graph_breaks: int = 0
    graph_breaks_after: int = 0
    recompiles: int = 0
    recompiles_after: int = 0
    loss_match: bool | None = None
    losses: str = ""  # the losses compared, in words
    kept: bool = False
    why: str = ""  # "kept", or why not (or why it was not measured)
    ratio: float | None = None  # the step after / before (under 1: faster)
    ratio_low: float | None = None  # its 95% interval (bootstrap over the pairs of runs)
    ratio_high: float | None = None
    pairs: int = 0  # the alternated pairs of runs (the unchanged job's, this remedy's)
    expected: str = ""  # what it can move, given the verdict, in words (before measuring)
    settling: str = ""  # its effect still changing across the window, in words ("" settled)
    error: str = ""  # the job's own error, where a run with it failed
    hint: str = ""  # torch's hint beside that error
    remedies: list[str] = field(default_factory=list)  # "all kept": the remedies made at once


@dataclass
class TryBaseline:
    """`run --try-fixes`' unchanged runs of the job, the one baseline every remedy is
    measured against: their step (the median of each run's window mean), how far the
    runs' own windows spread (max - min, a share of it), what ran beside them, and why
    the runs stopped where they did."""

    step_ms: float
    runs: int
    spread: float  # (max - min) / median of the runs' window means
    load: str = ""  # other processes busy on the job's cores during the runs, in words
    budget_s: float = 0.0  # --budget
    stopped: str = ""  # "settled", or "the budget ran out" (more pairs would narrow it)


@dataclass
class Runtime:
    """What a `compilediag run` job did as it ran: the command, how it ended, and the
    runtime probe's figures (no trace holds them)."""

    command: list[str] = field(default_factory=list)
    exit_code: int | None = None  # None: ended by a signal
    signal: str = ""
    interrupted: bool = False  # stopped by Ctrl-C or a signal sent to compilediag
    stop_after: int | None = None  # --stop-after N: the job was to end after its step N
    bound: StepBound | None = None  # what bounds the step (the verdict); None: no step measured
    wall_s: float = 0.0
    processes: int = 0  # processes that compiled (each wrote a runtime file)
    # the job's steps (the lowest rank's process): its optimizer's steps where it made one;
    # else calls of the first compiled entry (what torch.compile returned), whether they ran
    # compiled or eagerly; "frame": of the first compiled frame's graphs, where the entry
    # could not be seen
    steps: int = 0
    steps_at: StepsAt = StepsAt.ENTRY
    optimizer: str = ""
    optimizer_options: dict[str, bool] = field(default_factory=dict)  # its foreach / fused
    skipped_steps: int = 0  # of its steps, GradScaler skipped (inf or NaN gradients)
    loaders: dict[str, int] = field(default_factory=dict)  # the data loader timed
    step_frame: str = ""  # the first compiled frame, by name
    step_file: str = ""
    step_line: int = 0
    window: list[int] = field(default_factory=list)  # --profile-steps A-B; [] when off
    window_steps: int = 0  # complete steps measured in the window
    window_rank: int | None = None  # the process whose window is shown (the lowest rank)
    window_compiled: list[int] = field(default_factory=list)  # steps left out: torch compiled
    window_no_grad: int = 0  # window steps run with grad mode off (evaluation, as a rule)
    window_eval: int = 0  # window steps whose module was in eval mode
    # the steps just outside the window, timed without the window's per-graph timing: the
    # median step and how many; against the window's step, what profiling costs
    unprofiled_step_ms: float | None = None
    unprofiled_steps: int = 0
    rank_steps: list[RankStep] = field(default_factory=list)  # several ranks: each one's window
    loop: list[LoopLine] = field(default_factory=list)  # the loop's lines (window rank's)
    # the window's median step and median parts (window_rank's); the breakdown is the mean
    step_medians: dict[str, float] = field(default_factory=dict)
    # the kernel profile after the window: its steps (0: none), the GPU's name (CUDA), and
    # whether it was turned off (--no-kernels)
    kernel_steps: int = 0
    kernel_device: str = ""
    kernels_off: bool = False
    # mode="reduce-overhead": graphs that ran without a CUDA graph, and why (the trace's
    # reasons), and CUDA graphs recorded again; summed over the processes
    cudagraph_skips: int = 0
    cudagraph_skip_reasons: list[str] = field(default_factory=list)
    cudagraph_rerecords: int = 0
    # a training job's evaluations; the window's steps that held one on any rank, left out
    # of the step's figures (rank_steps' too)
    other_work: list[StepWork] = field(default_factory=list)
    window_left_out: list[int] = field(default_factory=list)
    # of those, the steps that stalled (no compile, no other work, many times the others:
    # other_work.stalled_steps): each step's ms, on the rank where it was longest
    window_stalled: dict[str, float] = field(default_factory=dict)
    # ... of it in Python's gc, where the collector took most of the pause
    window_stalled_gc: dict[str, float] = field(default_factory=dict)
    # the kernel profile's own steps: their numbers, their mean (start to start, under
    # torch.profiler: what its kernels are set against), and those that held other work
    kernel_step_numbers: list[int] = field(default_factory=list)
    kernel_step_ms: float | None = None
    kernel_steps_held: list[int] = field(default_factory=list)
    tried: list[Tried] = field(default_factory=list)  # run --try-fixes: each remedy's runs
    try_baseline: TryBaseline | None = None  # run --try-fixes: the unchanged runs


@dataclass
class KernelTiming:
    """A kernel's time in a `compilediag run` window, per step: a generated kernel (matched
    to the Report's kernels by name: its lines and modules), a library call a graph made,
    or another CUDA kernel. On CUDA the device's time; on CPU the kernel's own. Where the
    device's peak is known, what the kernel achieved against it."""

    name: str
    kind: str  # generated / library / device
    calls: float  # a step
    ms: float  # a step
    share: float  # of the step
    compile_id: str = ""
    source_lines: list[str] = field(default_factory=list)
    modules: list[str] = field(default_factory=list)
    shapes: str = ""
    op: str = ""  # CUDA: the library call (aten op) a graph made that launched it
    bytes: int | None = None  # a call (the tensors it is given)
    gb_per_s: float | None = None
    tflop_per_s: float | None = None
    peak_share: float | None = None  # of the device's bandwidth (or FLOP/s for a library call)
    peak_unit: str = ""  # a library call's: the FLOP/s it is set against (bf16, tf32, fp32)
    lost_ms: float = 0.0  # a step, against the peak (its whole time where no peak is known)


@dataclass
class Timings:
    eager_ms: Stat | None = None
    compiled_ms: Stat | None = None
    device_ms: DeviceTime | None = None  # CUDA: the GPU's time per call beside the wall time
    bound: Bound | None = None  # CUDA: from wall vs device time
    first_call_s: float | None = None
    speedup: float | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    outputs_match: bool | None = None
    repeat: int = 0  # timed blocks per variant
    calls_per_block: int = 1
    warmup: int = 0
    method: str = ""
    noise: str = ""  # why eager/compiled/speedup can't be trusted; "" when they can
    cudagraph_skips: list[str] = field(default_factory=list)
    # where a compiled call's time goes (torch.profiler, Inductor): in graphs, in the Python
    # between them, and outside every compiled frame; the profiled call, whose parts they are
    breakdown: Breakdown | None = None
    mutated_inputs: list[str] = field(default_factory=list)  # each variant got a fresh copy
    notes: list[str] = field(default_factory=list)  # why the speed-up may disappoint
    # run --profile-steps: the window's kernels, most time lost against the device's peak
    # first, and the device whose peak that is
    kernels: list[KernelTiming] = field(default_factory=list)
    peak: str = ""
    # the intra-op threads the timing ran with, torch's count in the run, and who set the
    # one used: "torch", "you" (OMP_NUM_THREADS, MKL_NUM_THREADS, the model file) or
    # "compilediag" (fewer, for busy cores; a count you set is never changed); 0 and "":
    # not recorded
    threads: int = 0
    threads_default: int = 0
    threads_set_by: str = ""
    # the cores the run may use and the load beside it just before timing (other
    # processes' demand on those cores, in cores); None: not looked at
    cores: int = 0
    load: float | None = None


@dataclass
class FunctionCost:
    """A function Dynamo traced (torch's Dynamo profiler): where it is defined, how often it
    was traced, its own time (without the functions it called) and its time with them, in
    seconds; its own time as a share of all tracing."""

    function: str
    file: str
    line: int
    calls: int
    own_s: float
    total_s: float
    share: float
    inlined: bool = True  # called from a frame Dynamo compiled (False: such a frame itself)


@dataclass
class Tracing:
    """All of Dynamo's tracing (each frame's, summed) and the functions it went to, outside
    torch, costliest first."""

    total_s: float
    functions: list[FunctionCost] = field(default_factory=list)


@dataclass
class CompileTime:
    dynamo_s: float = 0.0
    aot_s: float = 0.0
    inductor_s: float = 0.0
    codegen_s: float = 0.0
    backward_s: float = 0.0  # --train: compiling the backward graphs, at the first backward
    total_s: float = 0.0
    kernel_compile_s: float = 0.0  # torch's triton_compile_time_us: compiling the generated kernels (Triton on CUDA, C++ on CPU), part of the phases above
    caches: dict[str, int] = field(default_factory=dict)  # e.g. fx_graph_cache_miss: 2
    # each cache's bypasses by the reason torch gives: {"aotautograd": {"FX graph cache is
    # not enabled": 10}}
    bypasses: dict[str, dict[str, int]] = field(default_factory=dict)
    tracing: Tracing | None = None  # where Dynamo's tracing went, by function (explain)


@dataclass
class Disagreement:
    file: str | None
    line: int | None
    seen_by: str  # "trace" or "explain"
    reason: str
    believe: str  # which source to believe, and why


@dataclass
class CrossCheck:
    explain_graph_breaks: int
    explain_sites: list[Site] = field(default_factory=list)
    agree: bool = True
    disagreements: list[Disagreement] = field(default_factory=list)
    error: str = ""


@dataclass
class Rule:
    name: str
    limit: float
    value: float
    passed: bool
    # a multi-rank report, a budget on what each process compiles: `value` is the worst
    # rank's, `rank` names it and `message` says its figure ("rank 3 compiled for 61.20 s,
    # the slowest of 8 ranks"); "" for one process
    rank: str = ""
    message: str = ""


@dataclass
class Verdict:
    passed: bool = True
    rules: list[Rule] = field(default_factory=list)
    regressions: list[str] = field(default_factory=list)  # against --baseline, in words
    improvements: list[str] = field(default_factory=list)
    new_sites: list[Site] = field(default_factory=list)  # break sites the baseline lacked


@dataclass
class RankSpread:
    """A summary figure over the ranks of a job, each rank's own (ranks compile side by side:
    a sum over them is no process's figure): the least, the median rank's, the most, and the
    rank with the most (the first by position, where several have it)."""

    min: float
    median: float
    max: float
    max_rank: str = ""  # its label: "rank 3"


@dataclass
class Summary:
    """What one process compiled. In a multi-rank report (`ranks` > 1) each figure is the
    most any one rank had (what a per-process budget is judged on), `per_rank` gives each
    figure's spread over the ranks, and only the fields named `total_` sum over them."""

    graphs: int = 0
    graph_breaks: int = 0
    unique_graph_breaks: int = 0
    recompiles: int = 0
    kernels: int = 0  # distinct kernel definitions in the generated code
    compile_time_s: float = 0.0
    speedup: float | None = None
    speedup_noisy: bool = False  # the timings' blocks spread too much to trust it (timings.noise)
    compile_failures: int = 0
    # torch's own count (torch._inductor.metrics.generated_kernel_count): every kernel object
    # Inductor built in the run, those later fused away or dropped too; 0 on an FX-graph
    # cache hit; None from a trace
    torch_kernel_count: int | None = None
    ranks: int = 0  # a multi-rank report: how many ranks the figures above are the worst of
    # a multi-rank report: graphs, graph_breaks, unique_graph_breaks, recompiles, kernels,
    # compile_time_s and compile_failures over the ranks
    per_rank: dict[str, RankSpread] = field(default_factory=dict)
    total_graphs: int | None = None  # a multi-rank report: the graphs every rank compiled, summed
    # a multi-rank report: every rank's compile time, summed (the machine time spent compiling)
    total_compile_time_s: float | None = None


@dataclass
class CacheKey:
    """One FX-graph cache lookup of a compile, as the trace records it: hit, miss or
    bypass, its key, and the key's components (name -> hash; and the value's text,
    shortened: `diff` names a miss's cause with them)."""

    compile_id: str
    status: str  # hit, miss, bypass
    key: str = ""
    components: dict[str, str] = field(default_factory=dict)
    values: dict[str, str] = field(default_factory=dict)
    reason: str = ""  # a bypass's


@dataclass
class RankGraph:
    """A graph one rank compiled: by its place, which ranks that compiled alike share (their
    compile ids can differ), and what its compile took on that rank."""

    compile_id: str
    place: str  # "forward (model.py:12)", or a resumed frame's "forward, after line 14 (...)"
    compile_s: float = 0.0


@dataclass
class RankSummary:
    """One rank of a distributed job (one trace file)."""

    rank: int | None
    file: str
    summary: Summary
    label: str = ""  # "rank 3", or with the file name where two files claim one rank
    break_sites: list[str] = field(default_factory=list)  # "model.py:12 print(...): reason"
    recompile_reasons: list[str] = field(default_factory=list)
    # what its recompiling calls changed, values left out ("forward: input_ids"): each
    # recompile's failed guard and what else the call changed (Recompile.also_changed)
    changed: list[str] = field(default_factory=list)
    # the collectives Inductor scheduled, graph by graph, in order ("0/0: all_reduce_")
    collectives: list[str] = field(default_factory=list)
    graph_order: list[str] = field(default_factory=list)  # graph_execution, when recorded
    caches: dict[str, int] = field(default_factory=dict)  # FX-graph cache hits, misses
    graphs: list[RankGraph] = field(default_factory=list)  # in compile order


@dataclass
class RankGroup:
    """Ranks whose findings are alike (the same breaks, recompiles, graphs, collectives,
    graph order and cache use): shown as one."""

    ranks: list[int]  # positions in Report.ranks
    summary: Summary  # what each of them compiled; compile_time_s: the group's median rank
    compile_max_s: float = 0.0
    slowest: str = ""  # the label of the group's slowest rank


@dataclass
class Counts:
    graphs: int = 0
    graph_breaks: int = 0  # sites
    recompiles: int = 0
    speedup: float | None = None
    compile_s: float | None = None  # the compile time (compile_time.total_s)
    # --try-fixes' compile remedies: the compile with empty caches, as a new machine or a CI
    # runner has it, and again with the caches that run filled
    compile_s_cold: float | None = None
    compile_s_warm: float | None = None


@dataclass
class VerifiedFix:
    """A remedy tried in a run of its own (--try-fixes): what it changed, measured."""

    remedy: str
    code: str  # the lines to add to the user's code
    targets: list[str]  # the findings it is meant to remove
    before: Counts
    after: Counts | None
    outputs_match: bool | None
    verdict: FixOutcome
    error: str = ""


@dataclass
class TraceInfo:
    files: list[str] = field(default_factory=list)
    records: int = 0
    unknown_records: dict[str, int] = field(default_factory=dict)
    skipped_lines: int = 0  # lines that were neither a record nor its payload
    damaged_payloads: int = 0  # payloads whose md5 differs from the one torch stated
    not_analysed: dict[str, int] = field(default_factory=dict)  # present, read past: kind -> n
    ignored_files: list[str] = field(default_factory=list)  # files with no trace record
    produced_by: list[str] = field(default_factory=list)  # torch.compile, torch.export, AOTInductor


@dataclass
class Report:
    tool: dict[str, str]
    environment: Environment
    target: TargetInfo
    summary: Summary = field(default_factory=Summary)
    graph_breaks: list[GraphBreak] = field(default_factory=list)
    recompiles: list[Recompile] = field(default_factory=list)
    recompile_limit_hits: list[LimitHit] = field(default_factory=list)
    compile_failures: list[CompileFailure] = field(default_factory=list)
    verified_fixes: list[VerifiedFix] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    graphs: list[Graph] = field(default_factory=list)
    kernels: list[Kernel] = field(default_factory=list)
    timings: Timings | None = None
    compile_time: CompileTime | None = None
    cross_check: CrossCheck | None = None
    verdict: Verdict = field(default_factory=Verdict)
    errors: list[Finding] = field(default_factory=list)
    notes: list[Finding] = field(default_factory=list)  # frames torch skipped, and why
    ranks: list[RankSummary] = field(default_factory=list)  # `report` on a multi-rank trace
    rank_groups: list[RankGroup] = field(default_factory=list)  # ranks that compiled alike
    divergence: list[Finding] = field(default_factory=list)  # ranks that differ from the rest
    trace: TraceInfo | None = None  # what was read from the trace
    runtime: Runtime | None = None  # `compilediag run`: the job as it ran
    schema_version: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        return {"schema_version": d.pop("schema_version"), **d}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Report:
        from compilediag.report.migrations import migrate
        from compilediag.report.serial import from_plain, to_plain

        def summarise(ranks: list[dict[str, Any]]) -> dict[str, Any]:
            summary = job_summary([from_plain(RankSummary, r) for r in ranks])
            return dict(to_plain(summary))

        version = data.get("schema_version")
        data = migrate(data, summarise)
        if data.get("schema_version") != SCHEMA_VERSION:
            raise ValueError(
                f"report schema_version {version!r} is not {SCHEMA_VERSION}; "
                "re-create it with this compilediag"
            )
        return from_plain(cls, data)


# the Summary figures a rank has one of: in a job's summary, the worst rank's, with their
# spread over the ranks
PER_RANK = (
    "graphs",
    "graph_breaks",
    "unique_graph_breaks",
    "recompiles",
    "kernels",
    "compile_time_s",
    "compile_failures",
)


def job_summary(ranks: list[RankSummary]) -> Summary:
    """The summary of a job's ranks: what one rank compiled, not the sum over ranks that
    compiled side by side. Each figure is the worst rank's (the most: a per-process budget
    is judged on it), `per_rank` its spread (least, median rank's, most, and the rank with
    the most); the graphs and compile time summed over the ranks are `total_*`."""
    if not ranks:  # files none of which held a record
        return Summary()
    spreads: dict[str, RankSpread] = {}
    for name in PER_RANK:
        figures = [getattr(r.summary, name) for r in ranks]
        values = sorted(figures)
        worst = ranks[figures.index(values[-1])]  # the first with the most
        spreads[name] = RankSpread(
            min=values[0],
            median=values[len(values) // 2],  # a rank's own figure, as the rank groups' is
            max=values[-1],
            max_rank=rank_label(worst),
        )
    return Summary(
        graphs=int(spreads["graphs"].max),
        graph_breaks=int(spreads["graph_breaks"].max),
        unique_graph_breaks=int(spreads["unique_graph_breaks"].max),
        recompiles=int(spreads["recompiles"].max),
        kernels=int(spreads["kernels"].max),
        compile_time_s=spreads["compile_time_s"].max,
        compile_failures=int(spreads["compile_failures"].max),
        ranks=len(ranks),
        per_rank=spreads,
        total_graphs=sum(r.summary.graphs for r in ranks),
        total_compile_time_s=round(sum(r.summary.compile_time_s for r in ranks), 6),
    )


def rank_label(r: RankSummary) -> str:
    """A rank's label (label_ranks'), or, in a report saved before it had one, its rank."""
    return r.label or (f"rank {r.rank}" if r.rank is not None else os.path.basename(r.file))
