"""What the serving pass hands back to the CLI (through the worker's result): the stream it
replayed, what torch ran for each distinct request, the stream's latencies and each plan as
it measured it."""

from __future__ import annotations

from dataclasses import dataclass, field

from compilediag.report.serving import GraphState, Plan


@dataclass
class ServingFacts:
    stream: list[list[list[int] | None]] = field(default_factory=list)
    base: list[list[int]] = field(default_factory=list)  # each tensor's shape, get_inputs()'s
    names: list[str] = field(default_factory=list)  # each tensor's parameter name
    dtypes: list[str] = field(default_factory=list)  # ... and dtype ("int64")
    distinct: list[int] = field(default_factory=list)  # first occurrences (0-based), in order
    regions: list[list[str]] = field(default_factory=list)  # per distinct request: compile ids
    repeats_compiled: int = 0  # frames compiled while the whole stream was replayed after
    compiled_ms: list[float] = field(default_factory=list)  # per request, the whole stream
    eager_ms: list[float] = field(default_factory=list)
    plans: list[Plan] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    positions: dict[str, int] = field(default_factory=dict)  # the model's position tables
    most: list[int] = field(default_factory=list)  # --max-shape: the largest request served
    fit: int = 0  # the plans are fitted to the stream's first `fit` requests (stream.fitted_part)
    mode: str = "inference_mode"  # the mode the stream was served in (calls.SERVING_MODES)
    # under CUDA graphs: after the distinct requests' second call, after the whole stream
    cuda_graphs: GraphState | None = None
    cuda_graphs_replayed: GraphState | None = None
