"""The compile facts of the Report: graphs and their calls, graph breaks, recompiles
(each failed guard's change), compile failures and limits hit, kernels, compile time
and the tracing it spent, explain's cross-check, and the FX-graph cache keys. Re-exported
by `report.model`, whose Report holds them (the JSON contract is the tree's).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from compilediag.report.vocabulary import (
    BreakCause,
    CallState,
    FixSource,
    KernelKind,
    RecompileCause,
)


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
    # the function whose rest torch ran in eager mode, not resuming after this break ('' where
    # it resumed): the code after the break compiles only once the break is gone
    skipped_rest: str = ""
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
    # a size recompile of a model input's frame: every input dim the frame's calls changed
    # (`input_ids:1`), the ones its advice marks dynamic and --try-fixes marks
    dims: list[str] = field(default_factory=list)


# how a failed compile that was a graph break under fullgraph=True begins its reason
BREAK_RAISED = "graph break made an error"


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

    @property
    def break_raised(self) -> bool:
        """A graph break fullgraph=True made an error (analysis/build.break_as_error)."""
        return self.reason.startswith(BREAK_RAISED)


@dataclass
class LimitHit:
    """Dynamo's recompile limit was reached: from then on a call of the frame that fits a
    graph it has runs that graph, and one that needs a new graph runs in eager mode."""

    frame: str
    file: str
    line: int
    limit: int
    compiles: int
    distinct_reasons: list[str] = field(default_factory=list)
    compile_id: str = ""  # the compile that hit the limit
    static_shapes: bool = False  # its compiles had automatic dynamic shapes off
    # the torch.compile call of the entry that runs the frame (`run`), and its line's code
    compile_file: str = ""
    compile_line: int = 0
    compile_code: str = ""
    # `run`, where the frame is the compiled entry's own: the entry's calls, by the probe
    step: int | None = None  # the step of its first call past the limit
    cached_calls: int = 0  # from that call on: calls that ran a graph it had
    eager_calls: int = 0  # ... and calls that ran in eager mode (no graph fit, none made)
    cached_shapes: list[str] = field(default_factory=list)  # their tensors' shapes, once each
    eager_shapes: list[str] = field(default_factory=list)
    # a call's host time per 1,000 elements of its first tensor, their median (CPU; None
    # on CUDA, where a call's host time is its launches)
    cached_ms_per_k: float | None = None
    eager_ms_per_k: float | None = None


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
    # its ops read from its name: Inductor's code names none for it (C++ kernels), and a
    # name can leave an op out (a multiply by a dynamic scalar, a look found)
    ops_by_name: bool = False


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
    # the compile time the caches' hits saved, by torch's record of each hit (the time the
    # compile it stored took): a run with an empty cache compiles that much longer
    cache_saved_s: float = 0.0
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
