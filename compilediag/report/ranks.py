"""The Report's figures per rank and over ranks: the summary (one process's figures,
and in a job's report the worst rank's with their spread), each rank's own summary and
graphs, groups of ranks that compiled alike, and the job's summary made from its ranks'.
Re-exported by `report.model`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field


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
class RankGraph:
    """A graph one rank compiled: by its place, which ranks that compiled alike share (their
    compile ids can differ), and what its compile took on that rank."""

    compile_id: str
    place: str  # "forward (model.py:12)", or a resumed frame's "forward, after line 14 (...)"
    compile_s: float = 0.0
    # its compile's FX-graph cache lookups: hits, misses (a rank's `caches` sums them)
    fx_hits: int = 0
    fx_misses: int = 0


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
