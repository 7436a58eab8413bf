"""Ready to serve (#69): what a stream of requests compiles, where the recompile limit
sends requests to eager, the plan that bounds the graphs (measured), the warm-up that
compiles them all (verified under torch's `fail_on_recompile` stance in a fresh process),
and the cold start with empty caches, warm caches and torch's cache artifacts."""

from __future__ import annotations

from dataclasses import dataclass, field

# the plans' kinds, smallest change first, and their names in words
PLAN_NAMES = {"as_is": "as you compile it", "mark_dynamic": "mark_dynamic", "bucket": "buckets",
              "dynamic": "dynamic=True"}  # fmt: skip


@dataclass
class StreamCompile:
    """A graph the stream compiled: the request that made it, torch's compile id."""

    request: int  # 1-based, in the stream
    compile_id: str
    frame: str
    seconds: float  # the request's wall time (its compile in it)
    recompile: bool
    reason: str = ""  # the failed guard, in words (a recompile)


@dataclass
class StreamLimitHit:
    """A frame hit the recompile limit at `request`: the requests after it that needed a
    new graph ran in eager mode (torch's own records: no compiled region ran for them)."""

    frame: str
    limit: int
    request: int
    eager_requests: list[int] = field(default_factory=list)


@dataclass
class PlanDim:
    """An input's dimension that varies over the stream: the sizes it took."""

    input: int  # the tensor's place among the call's tensors (0-based)
    dim: int
    low: int
    high: int
    multiple: int | None = None  # bucket (a report saved before #75): pad to a multiple of it
    sizes: list[int] = field(default_factory=list)  # bucket: pad up to the next of these


def by_size(marks: list[PlanDim]) -> list[PlanDim]:
    """One mark for each size the tensors share (ids and their mask vary together)."""
    seen: dict[tuple[int, int, int], PlanDim] = {}
    for m in marks:
        seen.setdefault((m.dim, m.low, m.high), m)
    return list(seen.values())


@dataclass
class BucketOption:
    """A bucket list and what it costs: `buckets` padded shapes (graphs, and CUDA graphs to
    hold), `sizes` for each size the tensors share, the padded work over the real work."""

    buckets: int
    sizes: list[list[int]]
    padding_share: float


@dataclass
class Latency:
    """Per request, over the whole stream after its compiles (ms): mean and median."""

    mean_ms: float
    median_ms: float
    requests: int


@dataclass
class HeldOut:
    """A plan served the part of the stream it was not fitted to, in a fresh process, as its
    code runs: after its warm-up (fitted on the stream's first part), each request under
    torch's `fail_on_recompile` stance, in the serving mode. Requests by their number in the
    whole stream (1-based)."""

    requests: int = 0
    raised: list[int] = field(default_factory=list)  # would have compiled: raised
    eager: list[int] = field(default_factory=list)  # above the largest bucket: ran eager
    # under CUDA graphs: ran without one (a size's first call), recorded one (a capture)
    without_cuda_graph: list[int] = field(default_factory=list)
    recorded_cuda_graph: list[int] = field(default_factory=list)
    error: str = ""  # the check itself failed

    @property
    def missed(self) -> int:
        """Requests that did not run a graph the warm-up held."""
        return len(
            set(self.raised) | set(self.eager) | set(self.without_cuda_graph)
            | set(self.recorded_cuda_graph)
        )  # fmt: skip


@dataclass
class PaddingCheck:
    """A bucket plan's padding measured: each distinct request of the fitted part run eager
    as it is and padded to its bucket (zeros: ids 0, mask 0), the padded outputs cut back to
    the request's sizes and compared within torch's own tolerance for their dtype."""

    requests: int = 0  # distinct requests checked
    changed: int = 0  # ... whose outputs the padding changed
    worst: str = ""  # the output that changed most, at which request, by how much
    error: str = ""

    @property
    def kept(self) -> bool:
        return bool(self.requests) and not self.changed and not self.error


@dataclass
class Plan:
    """A way to bound the stream's graphs, measured in the run: the graphs it compiled over
    the stream's distinct shapes, the requests that still ran eager, its steady latency."""

    kind: str  # a key of PLAN_NAMES
    dims: list[PlanDim] = field(default_factory=list)
    graphs: int = 0
    compile_s: float = 0.0
    eager_requests: int = 0
    latency: Latency | None = None
    padding_share: float | None = None  # bucket: padded elements over real ones, the stream's
    warmup: list[int] = field(default_factory=list)  # the requests that compiled its graphs
    # the warm-up: each call's tensors' shapes (the requests above, or for buckets each
    # padded size in the stream's ranges, the shapes before the padding)
    warmup_shapes: list[list[list[int]]] = field(default_factory=list)
    code: str = ""  # the plan as code the user can paste
    cuda_graphs: GraphState | None = None  # under CUDA graphs: those its stream recorded
    held_out: HeldOut | None = None  # served the stream's part it was not fitted to
    request_ms: list[float] = field(default_factory=list)  # each fitted request, in order
    reference_ms: list[float] = field(default_factory=list)  # ... the model in eager beside it
    padding: PaddingCheck | None = None  # buckets: the padding measured against the outputs
    options: list[BucketOption] = field(default_factory=list)  # buckets: the trade-off


@dataclass
class GraphState:
    """CUDA graphs (a mode that records them, on CUDA): torch's CUDA graph trees at a point
    of the run. `sizes`: functions torch made CUDA graphs for, one per Inductor graph and
    input sizes (`by_graph`: per compile id); `warmed`: those whose first call ran (without
    a CUDA graph: its warm-up); `recorded`: graphs recorded (a size's second call);
    `rerecords`: recorded again (an input torch had recorded as static changed);
    `pool_mb`: their private memory pool, reserved; `skipped`: torch's count of graphs it
    ran without CUDA graphs (a reason in its log: a CPU tensor, a mutated input)."""

    recorded: int = 0
    sizes: int = 0
    warmed: int = 0
    rerecords: int = 0
    pool_mb: float = 0.0
    skipped: int = 0
    by_graph: dict[str, int] = field(default_factory=dict)


@dataclass
class CudaGraphs:
    """The stream's CUDA graphs: after its distinct requests ran twice (the sweep, then
    each again: warm-up and recording), and after the whole stream replayed; each plan's
    in `Plan.cuda_graphs`; in the chosen plan's fresh process, the requests after its
    warm-up that ran without one (a size warming up or recording)."""

    mode: str
    stream: GraphState = field(default_factory=GraphState)
    replayed: GraphState | None = None
    # the chosen plan's check (empty caches), the requests after its warm-up that ran
    # without a CUDA graph (a size's first call) and that recorded one (its second, a capture
    # in the request's time); None: not checked
    after_warmup: list[int] | None = None
    recorded_after_warmup: list[int] | None = None
    # torch's reasons for a graph it ran without CUDA graphs, as it logged them in the run
    skip_reasons: list[str] = field(default_factory=list)


@dataclass
class ColdStart:
    """The plan's warm-up, each in a fresh process: its seconds and what torch's caches
    did (hits, misses, bypasses by torch's counters)."""

    label: str  # "empty caches", "warm caches", "cache artifacts"
    seconds: float
    cache: dict[str, int] = field(default_factory=dict)
    recompiles_after_warmup: int = 0
    latency: Latency | None = None
    pid: int = 0  # the fresh process it ran in
    build_s: float | None = None  # of `seconds`, Inductor building its C++ kernels


@dataclass
class Unseen:
    """How often a request brings a shape not seen before, by the Good-Turing estimate: the
    share of requests whose shape came exactly once. `fit`: the same over the part the plans
    were fitted to, against what the held-out part brought (`held_out_new` of `held_out`
    requests had a shape the fitted part did not)."""

    once: int = 0  # requests whose shape came exactly once in the whole stream
    requests: int = 0
    fit_once: int = 0
    fit_requests: int = 0
    held_out: int = 0
    held_out_new: int = 0

    @property
    def chance(self) -> float:
        return self.once / self.requests if self.requests else 0.0

    @property
    def fit_chance(self) -> float:
        return self.fit_once / self.fit_requests if self.fit_requests else 0.0


@dataclass
class Serving:
    requests: int = 0
    fit_requests: int = 0  # the plans were fitted to the stream's first requests, these many
    fit_shapes: int = 0  # ... of these distinct shapes
    mode: str = "inference_mode"  # the serving mode the stream and the plans ran in
    names: list[str] = field(default_factory=list)  # the call's tensors, by parameter name
    # the model's own bound on a request's length: its position tables, the positions each holds
    positions: dict[str, int] = field(default_factory=dict)
    unseen: Unseen | None = None
    distinct_shapes: int = 0
    replayed: int = 0  # requests replayed through the compile (the distinct ones)
    repeats_compiled: int = 0  # compiles made by the rest of the stream replayed after
    graphs: int = 0
    recompiles: int = 0
    compiles: list[StreamCompile] = field(default_factory=list)
    limit_hits: list[StreamLimitHit] = field(default_factory=list)
    compile_s: float = 0.0
    eager_latency: Latency | None = None
    compiled_latency: Latency | None = None  # as the user compiles it, no plan
    plans: list[Plan] = field(default_factory=list)  # every plan measured
    plan: Plan | None = None  # the one chosen
    bounded: list[str] = field(default_factory=list)  # the kinds that bound the compiles
    why_plan: str = ""  # where no plan is chosen: why
    faster_padded: bool = False  # buckets ran faster than the plan (not chosen: padding)
    warmup: list[list[list[int]]] = field(default_factory=list)  # the chosen plan's requests
    recompiles_after_warmup: int | None = None
    verified: bool = False
    cold_start_s: float | None = None
    warm_cache_s: float | None = None
    artifacts_s: float | None = None
    cold_starts: list[ColdStart] = field(default_factory=list)
    artifacts: str = ""  # what torch's cache artifacts held, and how to load them
    notes: list[str] = field(default_factory=list)
    cuda_graphs: CudaGraphs | None = None  # a mode that records CUDA graphs, on CUDA
