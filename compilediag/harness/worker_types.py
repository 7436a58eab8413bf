"""What crosses the process boundary: the spec the CLI gives the worker, and the result
the worker writes back. One JSON pair (`compilediag.report.serial`) for both; no torch here.

Adding a measurement: a field on `WorkerResult` (or a type under it), the worker fills
it, the Report builder copies it, the renderer shows it.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from compilediag.fixes.remedies import Remedy
from compilediag.harness.serving.facts import ServingFacts
from compilediag.harness.target import Target
from compilediag.report.model import DeviceTime, Environment, Stat, Tracing
from compilediag.report.numerics import Numerics


@dataclass
class WorkerSpec:
    target: Target
    backend: str = "inductor"
    mode: str | None = None
    dynamic: bool | None = None
    device: str | None = None
    train: bool = False
    timings: bool = True
    cross_check: bool = False
    remedy: Remedy | None = None  # --try-fixes: apply this before compiling
    sweep: bool = False  # every input set (recompiles); else the first only (explain)
    cold: bool = False  # compile with private, empty caches (a first run's compile time)
    # --try-fixes' compile remedies: torch's caches in this folder, empty the first time (a
    # cold compile), then warm for a run after it; "" the user's (or --cold's)
    cache: str = ""
    repeat: int | None = None  # timed blocks per variant
    warmup: int | None = None  # untimed calls per variant
    # `compilediag fix`: seed torch's, Python's and NumPy's RNGs before the model is loaded
    # (the same weights and inputs in every run); folders put on sys.path behind the model
    # file's own (a scratch copy still imports its siblings); where to save the first
    # call's output tensors, and a saved run's outputs to compare them with
    seed: int | None = None
    search_path: list[str] = field(default_factory=list)
    save_outputs: str | None = None
    compare_outputs: str | None = None
    # explain, recompiles: judge the first call's outputs against a float64 reference, and
    # where compiled departs from eager, search for the cause (harness/numerics/) and write
    # a repro in `repro_dir` ("": no search, the verdict only: a --try-fixes remedy's run)
    numerics: bool = False
    repro_dir: str = ""

    def compile_kwargs(self) -> dict[str, Any]:
        """torch.compile's arguments as the user compiles (--backend, --mode, --dynamic)."""
        kwargs: dict[str, Any] = {"backend": self.backend}
        if self.mode:
            kwargs["mode"] = self.mode
        if self.dynamic is not None:
            kwargs["dynamic"] = self.dynamic
        return kwargs


@dataclass
class CallRecord:
    """One call of the compiled model in the sweep, with its wall-clock window."""

    index: int
    inputs: list[str]
    wall_s: float
    start: float  # epoch seconds, to match compiles to calls by their start_time
    end: float


@dataclass
class OutputCheck:
    compared: int = 0
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    mismatch: bool = False
    note: str = ""


@dataclass
class Measured:
    """Steady-state timing of eager against compiled."""

    eager_ms: Stat
    compiled_ms: Stat
    speedup: float | None
    repeat: int
    calls_per_block: int
    warmup: int
    method: str
    device: DeviceTime | None = None  # CUDA: the GPU's time per call
    profiled: Profiled | None = None  # where the compiled call's time goes
    # each Python function's time per compiled call, where torch gave up a frame: what a
    # frame left to eager mode costs (profiling.python_frames)
    python_ms: list[FrameTime] = field(default_factory=list)
    noise: str = ""  # why the figures can't be trusted (measure.noise_reason); "" when they can


@dataclass
class FrameTime:
    """One Python function's time per call of the compiled model (its calls inside itself
    counted once)."""

    file: str
    line: int  # the line it starts on
    name: str
    ms: float


@dataclass
class RegionTime:
    """One compiled frame's share of a call, from torch.profiler's `Torch-Compiled Region`
    events (per call, in ms): its graph (Inductor's `## Call CompiledFxGraph ##`), and the
    rest of the region outside graphs and nested regions - the Python Dynamo left to
    eager mode around that graph (a break's own code, guards, the call of the next frame)."""

    compile_id: str
    graph_ms: float
    gap_ms: float
    # `compilediag run` in training: its backward graph, and the eager backward between
    # that and the next backward graph (the backward of the code after it in forward)
    backward_ms: float = 0.0
    backward_gap_ms: float = 0.0


@dataclass
class Profiled:
    """The compiled model's calls under torch.profiler, after timing."""

    calls: int
    call_ms: float  # per call, as profiled (the profiler's own overhead included)
    outside_ms: float  # per call, outside every compiled region (the first cache lookup)
    regions: list[RegionTime] = field(default_factory=list)
    # `compilediag run`: per step, in backward (its graphs included), in the optimizer
    # step, in the data loader's next batch; outside_ms is then what remains
    backward_ms: float = 0.0
    optimizer_ms: float = 0.0
    data_ms: float = 0.0
    # each step: [the step, forward, backward, optimizer, data, the rest, evaluation, then of
    # forward the wrapper's hooks and the model's eager code, of backward its hooks] in ms (a
    # file of an older release: the first six or seven)
    per_step: list[list[float]] = field(default_factory=list)
    evaluation_ms: float = 0.0  # run: an evaluation's calls, and what the job did between them
    step_numbers: list[int] = field(default_factory=list)  # run: the job's step of each row
    # run: each step's graphs, {compile id: [graph, gap, backward graph, backward gap]} in ms
    step_regions: list[dict[str, list[float]]] = field(default_factory=list)
    # run, a sharded model (FSDP2): its wrapper's name, the time a step in its hooks in
    # forward (unshard: all-gathers and the waits in them; reshard), the model's forward
    # outside compiled calls (the eager code around compiled blocks), and in its hooks in
    # backward (unshard, reduce-scatter): parts of forward and of backward_ms
    wrapper: str = ""
    hooks_ms: float = 0.0
    module_ms: float = 0.0
    backward_hooks_ms: float = 0.0
    in_call_ms: float = 0.0  # of forward, the compiled calls' own work outside their graphs


@dataclass
class KernelTime:
    """A kernel over a `compilediag run` window, from torch.profiler (the probe's)."""

    name: str
    kind: str  # generated (Inductor's), library (an aten op a graph calls on CPU; on CUDA a
    # kernel such an op launched), device (another CUDA kernel), communication (a
    # collective: an NCCL kernel, a gloo operation)
    calls: int
    ms: float  # over the window's profiled steps: device time on CUDA, CPU time on CPU
    bytes: int = 0  # a call: the tensors a generated CUDA kernel is given
    flops: int = 0  # over its calls: torch.profiler's count for a library call
    shapes: str = ""  # a library call's input shapes
    op: str = ""  # CUDA: the library call (aten op) that launched this kernel
    dtype: str = ""  # a library call's first input's dtype, as torch.profiler names it


@dataclass
class OtherWork:
    """Work a training job did in one of its steps that is not training (`kind`
    "evaluation": calls of the compiled model under no_grad, inference_mode or eval mode),
    named by the function that ran it (the outermost frame of its stack that no training
    call has; one whose name says evaluation where there is one)."""

    kind: str = "evaluation"
    step: int = 0
    calls: int = 0
    ms: float = 0.0  # the host's time from its first call's start to its last call's end
    compiled: bool = False  # torch compiled during it (its time is the compile's, mostly)
    unfinished: bool = False  # under way when the job stopped (a signal): its time so far
    function: str = ""
    file: str = ""
    line: int = 0
    # it came before the step's training call: after the optimizer's step before (the job's
    # own numbering: after step `step - 1`)
    before: bool = False


@dataclass
class WindowLine:
    """A line of the training loop (or of a function of the user's a training call ran
    under it: a framework's hook) and its time in each step of the window, by line events
    on that code alone (the probe's line_clock): the job's own clock at that line."""

    file: str = ""
    line: int = 0
    function: str = ""  # the function it is in
    loop: bool = False  # the loop's own line (the frame that spans the steps)
    torch: bool = False  # a part of the step ran under it: the model, backward, optimizer, data
    ms: dict[str, float] = field(default_factory=dict)  # step -> ms at this line


@dataclass
class CompileCall:
    """A torch.compile call a job's process made: on what, from which line, and whether
    the object it returned was ever called."""

    what: str = ""  # the module's class or the function's name
    file: str = ""
    line: int = 0
    called: bool = False
    key: int = 0  # the returned object's id, as entry_calls name it


@dataclass
class ProcessRuntime:
    """What the runtime probe saw one process of a `compilediag run` job do
    (compilediag/harness/bootstrap/_compilediag_runtime/ writes it, one file per process)."""

    pid: int = 0
    rank: int | None = None
    argv: list[str] = field(default_factory=list)
    calls: dict[str, int] = field(default_factory=dict)  # compile id -> calls of its graph
    first_frame: int | None = None  # the first compiled frame (its graph names the step)
    training_frame: int | None = None  # the first frame a call that was no evaluation ran
    steps: int = 0  # calls of the first compiled entry (steps_at "entry"), else of that frame
    steps_at: str = "frame"  # "entry": counted at what torch.compile returned, eager calls too
    # (steps_at "entry") its calls trained: an evaluation's calls after that were no steps
    entry_trains: bool = False
    # "optimizer": steps of the first optimizer stepped (its class), with its foreach/fused
    optimizer: str = ""
    optimizer_options: dict[str, bool] = field(default_factory=dict)
    skipped_steps: int = 0  # of those steps, GradScaler skipped (inf or NaN gradients)
    loaders: dict[str, int] = field(default_factory=dict)  # the data loader: workers, pin_memory
    kernels: list[KernelTime] = field(default_factory=list)  # the window's, costliest first
    kernel_steps: int = 0  # the steps torch.profiler saw (the window's, compiled ones too)
    kernel_device: str = ""  # the GPU's name, on CUDA
    collectives_ms: float = 0.0  # over the kernel steps: the time any collective ran
    collectives_exposed_ms: float | None = None  # ... of it, with no compute beside it
    # over the kernel steps: the eager ops the step ran outside any compiled graph, at its
    # top (the loss, a metric, .item(), a copy; kind "eager"), costliest first
    rest: list[KernelTime] = field(default_factory=list)
    kernels_off: bool = False  # --no-kernels: no kernel profile after the window
    window: list[int] = field(default_factory=list)  # [A, B] asked for; [] when off
    profiled: Profiled | None = None  # the complete steps of the window, per step
    compiled_steps: list[int] = field(default_factory=list)  # window steps torch compiled in
    gc_ms: dict[str, float] = field(default_factory=dict)  # window steps' garbage collections
    # the machine's load average (1 minute) as the window ended, and the cores the process
    # may use; [] where not read
    load: list[float] = field(default_factory=list)
    no_grad_steps: int = 0  # window steps run with grad mode off
    eval_steps: int = 0  # window steps whose module was in eval mode
    plain_step_ms: list[float] = field(default_factory=list)  # steps near the window, untimed
    plain_steps: list[int] = field(default_factory=list)  # the job's step each of them is
    other_work: list[OtherWork] = field(default_factory=list)  # a training job's evaluations
    evaluation_calls: dict[str, int] = field(default_factory=dict)  # their graph calls, by id
    kernel_step_numbers: list[int] = field(default_factory=list)  # the kernel profile's steps
    # each outermost call of a compiled entry, the first 4096: [step, the entry's id, its
    # tensors' shapes, a graph ran, a graph was made, ms (host clock), first tensor's numel]
    entry_calls: list[list[Any]] = field(default_factory=list)
    kernel_step_ms: float | None = None  # their mean, start to start, under torch.profiler
    # over the kernel steps: each collective call in the order it started, [name, us]
    collective_calls: list[list[str | float]] = field(default_factory=list)
    # each kernel step's collectives: [its number, their ms, of it exposed ms]
    step_collectives: list[list[float]] = field(default_factory=list)
    # the steps the kernel profile ran through and left out: they held other work
    kernel_steps_held: list[int] = field(default_factory=list)
    kernel_steps_stalled: list[int] = field(default_factory=list)  # ... and those that stalled
    # the window's collectives, from torch's Flight Recorder: [process group, sequence
    # number, name, enqueued (time.time_ns), duration ms or None, step] (probe window_reads.py)
    window_collectives: list[list[Any]] = field(default_factory=list)
    window_lines: list[WindowLine] = field(default_factory=list)  # the loop's, in the window
    backends: list[str] = field(default_factory=list)  # the backends' names (`inductor`)
    compile_calls: list[CompileCall] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)  # the graphs' input devices (`cuda`)
    wall_s: float = 0.0  # from the probe's install to the file's writing
    window_end_s: float | None = None  # ... to the window's end
    last_step_s: float | None = None  # ... to the last step's end (the job's exit after it)
    exit_s: float | None = None  # ... to the start of the file's writing, its exit done
    cudagraph_skips: int = 0  # graphs run without a CUDA graph (torch's counter)
    cudagraph_skip_reasons: list[str] = field(default_factory=list)  # as torch logged them
    cudagraph_rerecords: int = 0  # CUDA graphs recorded again (torch's tree managers)
    # run --try-fixes: each step's losses (by step number) and the remedy this run made
    losses: dict[str, list[float]] = field(default_factory=dict)
    seed: int | None = None  # torch.initial_seed() (where losses were kept): alike when seeded
    tracing: Tracing | None = None  # Dynamo's tracing by function, in this process
    remedies: list[RemedyMade] = field(default_factory=list)

    def trains(self) -> bool:
        """A training job: it steps an optimizer, or its compiled model's calls trained
        (an evaluation's calls then run between its steps: other work)."""
        return self.steps_at == "optimizer" or self.entry_trains

    def first_entry(self) -> int | None:
        """The compiled entry the job's first graph was made in (its id), by the probe's
        tally."""
        return next((c[1] for c in self.entry_calls if c[4]), None)

    def model_calls(self) -> int | None:
        """How many times a step calls the model (the first compiled entry): the median over
        the steps its calls were tallied in, the first step (its compile) and the last one
        tallied (cut short where the tally filled) left out; None with fewer than 3."""
        key = self.first_entry()
        per: dict[int, int] = {}
        for c in self.entry_calls:
            if c[1] == key:
                per[int(c[0])] = per.get(int(c[0]), 0) + 1
        steps = sorted(per)[1:-1]
        return round(statistics.median(per[n] for n in steps)) if len(steps) >= 3 else None

    def step_work(self) -> dict[int, tuple[str, bool, int]]:
        """Each step's first call of the first compiled entry: its tensors' shapes, whether
        it ran in eager mode (no graph ran, none was made), its first tensor's elements."""
        key = self.first_entry()
        out: dict[int, tuple[str, bool, int]] = {}
        for c in self.entry_calls:
            if c[1] == key and int(c[0]) not in out:
                out[int(c[0])] = (str(c[2]), not c[3] and not c[4], int(c[6]))
        return out


@dataclass
class RemedyMade:
    """A change `run --try-fixes` made in a job's process: the remedy, the setting in code,
    what the job had, and the user's line that made the object changed (0: a setting)."""

    remedy: str
    what: str
    was: str = ""
    file: str = ""
    line: int = 0


@dataclass
class ExplainBreak:
    reason: str
    file: str | None
    line: int | None


@dataclass
class ExplainResult:
    """torch._dynamo.explain on the same inputs (--cross-check)."""

    graph_count: int = 0
    graph_break_count: int = 0
    breaks: list[ExplainBreak] = field(default_factory=list)
    error: str = ""


@dataclass
class WorkerFailure:
    kind: str  # usage, model, compile, internal
    message: str
    exception: str = ""
    file: str = ""  # the user's own frame, where there is one
    line: int = 0
    code: str = ""
    traceback: str = ""
    called_from: str = ""  # `model.py:23`, where `file` is another file of the user's


@dataclass
class ModelInfo:
    """What the user compiled, in their words: `GPT2LMHeadModel.forward` and the names of
    its parameters, so guards on `args[0]` read as `input_ids`."""

    name: str = ""
    params: list[str] = field(default_factory=list)
    file: str = ""  # where forward is defined
    line: int = 0
    end_line: int = 0  # its last line
    modules: dict[str, str] = field(default_factory=dict)  # submodule path -> class name


@dataclass
class WorkerResult:
    environment: Environment | None = None
    model: ModelInfo | None = None
    inputs: list[list[str]] = field(default_factory=list)  # each call's inputs, described
    calls: list[CallRecord] = field(default_factory=list)
    first_call_s: float | None = None
    output_check: OutputCheck | None = None
    numerics: Numerics | None = None  # spec.numerics: the outputs against float64, and why
    timings: Measured | None = None
    explain: ExplainResult | None = None
    mutated_inputs: list[str] = field(default_factory=list)  # inputs the model changes in place
    # torch._inductor.metrics.generated_kernel_count after the calls: every kernel object
    # Inductor built, those it fused away or dropped too (None: Inductor did not run)
    torch_kernel_count: int | None = None
    cudagraph_skips: list[str] = field(default_factory=list)  # torch's perf hints, at run time
    # `compilediag fix` (spec.compare_outputs): [eager, compiled] against the saved run's;
    # with --train the parameters' gradients after the first call too ([] without --train)
    reference_check: list[OutputCheck] = field(default_factory=list)
    gradient_check: list[OutputCheck] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # what failed without losing the report
    error: WorkerFailure | None = None  # what ended the run
    tracing: Tracing | None = None  # Dynamo's tracing by function (None: torch can't say)
    serving: ServingFacts | None = None  # `recompiles --requests`: the serving pass
    phases_s: dict[str, float] = field(default_factory=dict)  # harness/phases.py
