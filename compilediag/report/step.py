"""The run's step in the Report: explain's timings (a call's blocks, the device's own
time) and a `compilediag run` job's runtime facts - the step in parts, each rank's,
the loop's lines, the work that is not training, what bounds the step, the remedies
--try-fixes measured - and the kernel profile's kernels. Re-exported by `report.model`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from compilediag.report.numerics import LossCheck
from compilediag.report.vocabulary import Bound, Finding, RestKind, StepsAt


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
    # operations on CPU) over the kernel profile's steps (those after the window); on a
    # stream or thread of their own, alongside the parts above, so not one of them
    communication_ms: float | None = None
    # ... of it, exposed: the time no compute ran beside a collective (the step waits on it;
    # the rest overlaps compute); None where not measured
    communication_exposed_ms: float | None = None
    # the wait for the rank that arrived last at the collectives, a step of the window
    # itself (torch's Flight Recorder, matched across ranks: analysis/step/waits.py), inside
    # the parts above (where the rank blocked) and never longer than the step. None: one
    # rank, or a file that kept no collective of the window
    communication_wait_ms: float | None = None
    # run: what the rest holds that the kernel profile named (over its steps, after the
    # window): eager ops outside any graph and reads of a tensor's value; the rest's
    # other time is Python (logging, the loop's own code)
    rest: list[RestPart] = field(default_factory=list)
    # run, a sharded model (FSDP2): its wrapper, and a step's time in its hooks in forward
    # (unshard: its all-gathers and the waits in them; reshard), its forward's eager code
    # outside compiled calls (around compiled blocks), its hooks in backward (unshard,
    # reduce-scatter: a part of backward_ms)
    wrapper: str = ""
    hooks_ms: float = 0.0
    module_ms: float = 0.0
    backward_hooks_ms: float = 0.0
    # of forward, the compiled calls' own work outside their graphs (Dynamo's guard checks and
    # its code around them), from a call's start to its first graph, from its last to its return
    in_call_ms: float = 0.0
    # where a break torch could not resume after ended a graph the window ran: the function
    # and line whose rest ran in eager mode inside the calls (`forward after model.py:50`),
    # its forward time in `in_call_ms`, and backward outside the compiled graphs (the eager
    # code's backward, that rest's with it; None where backward was not timed per graph)
    eager_rest: str = ""
    eager_backward_ms: float | None = None

    def parts(self) -> list[tuple[str, float]]:
        """The step's parts in the order they run, those it has (a training step's
        backward, optimizer and data; every step's forward and the rest): (name, ms), adding
        up to it."""
        parts = [
            (
                "forward",
                self.in_graphs_ms
                + self.between_graphs_ms
                + self.hooks_ms
                + self.module_ms
                + self.in_call_ms,
            ),
            ("backward", self.backward_ms),
            ("optimizer", self.optimizer_ms),
            ("data", self.data_ms),
            ("evaluation", self.evaluation_ms),
        ]
        return [(n, v) for n, v in parts if v or n == "forward"] + [("the rest", self.outside_ms)]

    @property
    def exposed_wait_ms(self) -> float:
        """The wait for another rank a step: the time the rank could do nothing else, by
        arrivals (or the device's own time of each call); 0 where not known."""
        return self.communication_wait_ms or 0.0

    def rest_holds(self, profiled_ms: float) -> bool:
        """Whether ops the kernel profile timed in the rest (`profiled_ms` a step) fit in
        the rest the job's clock measured, within 25% and 0.05 ms (the two are taken over
        other steps): where they don't, torch.profiler made that time (on CPU it inflates
        what follows a compiled region), and it is no part of this step. In a sharded model
        they may be in forward's eager code (module_ms) too."""
        return profiled_ms <= (self.outside_ms + self.module_ms) * 1.25 + 0.05


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
    waits_for: int | None = None  # the rank it waited for most, in the window's steps
    loop: list[LoopLine] = field(default_factory=list)  # its loop's lines, a step
    loop_step_ms: float | None = None  # the step they were timed in (Runtime.loop_steps)

    @property
    def wait_share(self) -> float:
        """Its wait for another rank, a share of its step (both the window's)."""
        step, wait = self.breakdown.call_ms, self.breakdown.communication_wait_ms or 0.0
        return min(1.0, wait / step) if step else 0.0


@dataclass
class LoopLine:
    """A line of the training loop (or of a hook of the user's a framework's loop calls)
    and what it spent a step, over the steps they were timed in (Runtime.loop_steps), by
    line events on that code alone: the job's own clock at the user's line, where a
    profiler names host work only by its ops."""

    file: str
    line: int
    ms: float  # a step
    loop: str = ""  # the function the loop runs in
    # the function the line called: '' for the loop's own Python, LOOP_TORCH for torch's
    # (the model's call, backward, the optimizer's step; '' too in files before it)
    calls: str = ""
    source: str = ""  # the line's text
    # the function it calls (defined in its file) indexes with each item of a loop over a
    # tensor (source.indexes_item_by_item): a list of ints would do it in Python
    item_by_item: bool = False

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


LOOP_TORCH = "<torch>"  # a loop line under which a part of the step ran (the model, backward, ...)


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
    unfinished: bool = False  # under way when the job stopped (a signal): `ms` is so far
    # the occurrences torch compiled in, where others did not (`ms` leaves them out)
    compiled_times: int = 0
    compiled_ms: float = 0.0  # their median
    # every occurrence came before its step's training call: between two optimizer steps,
    # after step N - 1 in the job's own numbering (a step ends at the optimizer's)
    between_steps: bool = False


@dataclass
class StepBound:
    """What bounds a `compilediag run` step (analysis/step/verdict.py): the part (data, optimizer,
    eager, communication, compute, device, host, evaluation), its share of the step, its
    time a step, and why, in words; and the part next to it where that one's share is within
    BOUND_CLOSE of it (which of the two leads may change from run to run of the same job)."""

    part: str
    share: float
    ms: float
    why: str
    close: str = ""
    close_share: float = 0.0


# StepBound.close: the next part's share this much of the verdict's or more. A new user's
# look saw "compute" in one run and "optimizer" in the next, the job's clock giving those
# parts within 3% of each other
BOUND_CLOSE = 0.9


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
    # neither kept nor rejected: its interval holds both no gain and a 5% gain (one pair of
    # runs: no interval), and about this many more pairs would decide it
    undecided: bool = False
    more_pairs: int = 0
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
    budget_s: float | None = 0.0  # --budget (None: not given, the fewest rounds)
    stopped: str = ""  # "settled", or "the budget ran out" (more pairs would narrow it)
    # where an interval is too wide to tell 5% (trials.KEEP_AT) from nothing: said, and what
    # narrows it
    resolution: str = ""
    # the rounds' time: said before them (by the job's run under `run`), said again after the
    # first round (by its runs' own time), and taken (seconds; 0: a report before #76)
    forecast_s: float = 0.0
    revised_s: float = 0.0
    took_s: float = 0.0


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
    # how many times a step calls the model (the first compiled entry), by the probe's
    # tally of its calls: their median a step; None where not tallied (an older file)
    model_calls: int | None = None
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
    # ... their mean, where it is MEAN_OVER their median or more, and how many of them took
    # over SLOW times it (analysis/step/pace.py): a cost the window's figures do not hold
    unprofiled_mean_ms: float | None = None
    unprofiled_slow: int = 0
    # whether the window's steps did the work of those around it (analysis/step/
    # entry_calls.window_work): "" alike; "shapes": their shapes differ, and the window's
    # cost is over the shapes both ran a graph for (`window_cost`); "unlike": not compared
    window_work: str = ""
    window_cost: float | None = None
    # the job's own pace (analysis/step/pace.py): the window's median step as its
    # instruments ran it, and whether its figures (the step, its parts, each graph's, the
    # wait) are set on the steps around it (shares of their median) - else on that median
    window_step_ms: float | None = None
    at_pace: bool = False
    # the median of the steps just before the window (pace.MIN_BEFORE or more, no instrument
    # on); where it and the steps after differ by more than pace.MOVED, the job's pace moved
    # during the run (`pace_moved`): the figures are the window's own (at_pace false)
    before_step_ms: float | None = None
    pace_moved: bool = False
    # the window's median step and the steps around it further apart than pace.APART (more
    # than its instruments cost): the machine's pace moved between them, and the figures are
    # the window's own (at_pace false)
    pace_apart: bool = False
    # the window's steps' first and third quartiles, where they lie further apart than
    # pace.APART (steps that alternate between two levels): neither its instruments' cost
    # nor a moved pace is told apart from that, and the figures are the window's own
    window_spread_ms: list[float] = field(default_factory=list)
    # the machine's load average (1 minute) as the window ended, the cores the job's
    # process could use and torch's threads in it (an older release's: the first two); []
    # where not read
    window_load: list[float] = field(default_factory=list)
    # the cores other processes kept busy, of those the job could use, while it ran (its own
    # processes' CPU time left out); None where not read
    beside_cores: float | None = None
    rank_steps: list[RankStep] = field(default_factory=list)  # several ranks: each one's window
    # the rank the others wait for, in the window's steps: a performance finding, not
    # divergence (its ranks compile alike); gated by --max-wait-share
    stragglers: list[Finding] = field(default_factory=list)
    loop: list[LoopLine] = field(default_factory=list)  # the loop's lines (window rank's)
    # the steps they were timed over: the window's training steps (a compile left out)
    loop_steps: list[int] = field(default_factory=list)
    loop_step_ms: float | None = None  # their step, by the same clock (the loop's lines' sum)
    # steps whose lines took more than other_work.STALL times the others' median, left out
    loop_stalled: list[int] = field(default_factory=list)
    # how the ranks' waits were measured in the window's steps (analysis/step/waits.py):
    # "arrivals" (when each rank enqueued each collective), "durations" (torch timed each
    # on the device); '' where not measured
    wait_method: str = ""
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
    # ... the job's own lines that took most of it, each with its time in that step (its
    # sample images saved: waits.stalled_at), where they did
    window_stalled_at: dict[str, list[LoopLine]] = field(default_factory=dict)
    # the kernel profile's own steps: their numbers, their mean (start to start, under
    # torch.profiler: what its kernels are set against); those it ran through and left out
    # (they held other work: in a process alone, a training step more was profiled for
    # each); and the steps of any rank's profile that held other work on some rank (in that
    # rank's kernel rows, left out of its collectives a step)
    kernel_step_numbers: list[int] = field(default_factory=list)
    kernel_step_ms: float | None = None
    kernel_steps_held: list[int] = field(default_factory=list)
    kernel_steps_stalled: list[int] = field(default_factory=list)  # over 3x the others
    kernel_steps_waited: list[int] = field(default_factory=list)
    # the steps whose call of the compiled entry ran in eager mode past the recompile limit
    limit_eager_steps: list[int] = field(default_factory=list)
    tried: list[Tried] = field(default_factory=list)  # run --try-fixes: each remedy's runs
    try_baseline: TryBaseline | None = None  # run --try-fixes: the unchanged runs
    numerics: LossCheck | None = None  # run --check-numerics: the losses against eager's


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
