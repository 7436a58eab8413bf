"""The Report: one typed, serialisable tree that every renderer and the gate read.

`Report.to_dict()` is the JSON contract (`--format json`); `Report.from_dict()` reads it
back, so `compilediag render report.json` needs no model run and no torch.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from compilediag.report.compile import (  # noqa: F401 - re-exported: the Report's types
    CacheKey,
    Call,
    CompileFailure,
    CompileTime,
    CrossCheck,
    Disagreement,
    FunctionCost,
    Graph,
    GraphBreak,
    GuardChange,
    Kernel,
    LimitHit,
    Recompile,
    Site,
    SourceLine,
    Tracing,
)
from compilediag.report.numerics import Numerics  # noqa: F401 - re-exported
from compilediag.report.ranks import (  # noqa: F401 - re-exported: the Report's types
    PER_RANK,
    RankGraph,
    RankGroup,
    RankSpread,
    RankSummary,
    Summary,
    job_summary,
    rank_label,
)
from compilediag.report.serving import Serving  # noqa: F401 - re-exported
from compilediag.report.step import (  # noqa: F401 - re-exported: the Report's types
    LOOP_TORCH,
    Breakdown,
    DeviceTime,
    KernelTiming,
    LoopLine,
    RankStep,
    RestPart,
    Runtime,
    Stat,
    StepBound,
    StepWork,
    Timings,
    Tried,
    TryBaseline,
)
from compilediag.report.vocabulary import (
    Finding,
    FixOutcome,
    Source,
)

# 2: timings.device became timings.device_ms; `runtime`, `rank_groups` and each finding's
# `ranks` were added. 3: notes, errors and divergence became Findings (they were text).
# 4: a multi-rank report's summary gives what one rank compiled (the worst rank's figures,
# their spread over ranks in `per_rank`), no longer sums over ranks; sums are `total_*`.
# 5: a job's verdict and the remedies tried. 6: a straggler is `runtime.stragglers`, not
# divergence; the ranks' waits are measured in the window (`runtime.wait_method`).
# Older reports load through report_migrations.
SCHEMA_VERSION = 6
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
    # against --baseline: what was matched otherwise than its rules say (a renamed file)
    notes: list[str] = field(default_factory=list)


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
    # compiles that ended with no graph (no tensor op before the frame broke or returned)
    graphless: list[Graph] = field(default_factory=list)
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
    numerics: Numerics | None = None  # compiled against eager and float64, and why they part
    serving: Serving | None = None  # `recompiles --requests`: the stream, the plan, the cold start
    # explain, recompiles: what compilediag's own run took, by phase, in seconds: the worker's
    # (harness/phases.py), its start and exit, and the reading of its trace and kernels
    took_s: dict[str, float] = field(default_factory=dict)
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
