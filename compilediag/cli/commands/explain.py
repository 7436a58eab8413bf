"""`compilediag explain`: compile once, report breaks, graphs, kernels, compile time, timings."""

from __future__ import annotations

from dataclasses import dataclass, field

from compilediag.cli.commands.common import (
    FixOptions,
    GateOptions,
    OutputOptions,
    budgets,
    check_outputs,
    emit,
    judge,
    make_spec,
    run_model,
    verify_fixes,
)
from compilediag.cli.config import load_config
from compilediag.cli.options import RunOptions
from compilediag.errors import UsageError


@dataclass
class ExplainOptions:
    run: RunOptions = field(default_factory=RunOptions)
    gate: GateOptions = field(default_factory=GateOptions)
    out: OutputOptions = field(default_factory=OutputOptions)
    fixes: FixOptions = field(default_factory=FixOptions)
    cross_check: bool = False
    timings: bool = True
    repeat: int | None = None
    warmup: int | None = None
    repro_dir: str | None = "compilediag_repro"  # None: no numerics check


def run(opts: ExplainOptions) -> int:
    check_outputs(opts.out, opts.gate.junit)
    cfg = load_config()
    if opts.gate.limits.get("min_speedup") is not None and not opts.timings:
        raise UsageError("--min-speedup needs timings.", hint="Drop --no-timings.")
    # without timings, a speed-up budget in the config has nothing to judge
    rules = budgets(opts.gate, cfg, frozenset({"model", "timings"} if opts.timings else {"model"}))
    spec = make_spec(
        opts.run, cfg, "inductor",
        timings=opts.timings, cross_check=opts.cross_check, repeat=opts.repeat, warmup=opts.warmup,
        repro_dir=opts.repro_dir,
    )  # fmt: skip
    done = run_model(spec, opts.run.timeout)
    done = verify_fixes(done, spec, opts.fixes, opts.run.timeout)
    report, code = judge(done.report, rules, opts.gate.junit, done.failed)
    emit(report, opts.out)
    return code
