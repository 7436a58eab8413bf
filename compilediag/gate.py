"""Rules -> verdict -> exit code. Pure: reads Reports, never torch.

A rule compares one measured value with its limit. A baseline (a saved JSON report)
turns into rules too: nothing may get worse than it was, and what got better is listed.
Break sites are matched by file name, source code and reason - not by line number - so
an edit above a break does not look like a new break; one that differs in its file's name
alone is the same in a renamed file, said as a note. A budget on what a process compiles
(compile time, break sites, recompiles, compile failures) judges a multi-rank report's
worst rank, and names it: ranks compile side by side, and their sum is no process's.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from compilediag.errors import GATE_FAILED, OK
from compilediag.report.model import Report, Rule, Site, Verdict
from compilediag.report.numerics import PASSING
from compilediag.report.words import ms


@dataclass(frozen=True)
class GateRule:
    """One gate rule, declared once: the CLI option (`--max-recompiles`), the key of
    [tool.compilediag] in pyproject.toml and the value both take come from it, and its
    check judges a Report against the value.

    `runs`: the runs that can judge it, any of: `model` (explain), `timings` (explain,
    timed), `sweep` (recompiles), `trace` (report, run: every rank)."""

    key: str  # max_recompiles: --max-recompiles, and the config key
    kind: type  # bool (a switch), int or float (a limit)
    help: str
    check: Callable[[Report, Any], Rule]
    runs: frozenset[str]
    former: str = ""  # the key it had before: still taken, as an option and in the config

    @property
    def option(self) -> str:
        return "--" + self.key.replace("_", "-")

    @property
    def options(self) -> list[str]:
        """Its option, and the one it had before (still taken)."""
        return [self.option] + (["--" + self.former.replace("_", "-")] if self.former else [])

    @property
    def words(self) -> str:
        """The value a config key takes, for its error message."""
        return {bool: "true or false", int: "a whole number, 0 or more"}.get(
            self.kind, "a number like 1.2, 0 or more"
        )


# what one process compiled, in words, for a multi-rank report's worst rank: Summary field ->
# (how its figure is said, the rank it is among the ranks)
PER_PROCESS: dict[str, tuple[Callable[[float], str], str]] = {
    "compile_time_s": (lambda v: f"compiled for {v:.2f} s", "the slowest"),
    "unique_graph_breaks": (lambda v: f"broke at {_plural(v, 'site')}", "the most"),
    "recompiles": (lambda v: f"had {_plural(v, 'recompile')}", "the most"),
    "compile_failures": (lambda v: f"had {_plural(v, 'compile failure')}", "the most"),
}


def _plural(n: float, word: str) -> str:
    return f"{n:g} {word}{'s' * (n != 1)}"


def _per_process(name: str, figure: str) -> Callable[[Report, Any], Rule]:
    """The check of a budget on what each process compiles (`figure`, a Summary field).
    Ranks compile side by side, so a multi-rank report is judged on its worst rank, which
    the rule names (their sum is no process's figure); one process, on its own figure."""

    def check(report: Report, limit: float) -> Rule:
        spread = report.summary.per_rank.get(figure)
        if spread is None or report.summary.ranks < 2:
            return _rule(name, limit, getattr(report.summary, figure))
        said, most = PER_PROCESS[figure]
        n = report.summary.ranks
        message = (
            f"each of {n} ranks {said(spread.max)}"
            if spread.min == spread.max
            else f"{spread.max_rank} {said(spread.max)}, {most} of {n} ranks"
        )
        passed = spread.max <= limit
        return Rule(name, limit, spread.max, passed, rank=spread.max_rank, message=message)

    return check


def _fullgraph(report: Report) -> Rule:
    """Any graph break, those fullgraph=True made an error too (a failed compile, which
    torch's break counters do not count: a look read "ok fullgraph: 0 graph-break sites"
    beside the compile failure it was)."""
    rule = _per_process("fullgraph", "unique_graph_breaks")(report, 0)
    raised = {(f.file, f.line) for f in report.compile_failures if f.break_raised}
    if not raised:
        return rule
    said = rule.message or _plural(rule.value, "graph-break site")
    return Rule(
        "fullgraph", 0, rule.value + len(raised), False, rank=rule.rank,
        message=f"{said} and {len(raised):g} that raised under fullgraph=True (a compile failure)",
    )  # fmt: skip


def _speedup(report: Report, floor: float) -> Rule:
    """The speed-up against its floor, where the timings can be trusted; where they can't
    (their noise: blocks that spread, a figure far off its one-thread cost) the rule is
    not judged, and says why: a gate on a figure the run says is wrong would pass or fail
    on the machine's load."""
    speedup = report.summary.speedup if report.summary.speedup is not None else 0.0
    why = report.timings.noise if report.timings is not None else ""
    if why:
        return Rule(
            "min-speedup (not judged: the timings are not reliable)", floor, speedup, True,
            message=why,
        )  # fmt: skip
    return Rule("min-speedup", floor, speedup, speedup >= floor)


def _outputs(report: Report, _: bool) -> Rule:
    """Compiled against eager: a difference that is random numbers only, or compiled the
    nearer to float64, passes (numerics); where no float64 judgment was made, the outputs
    as compared within the dtype's tolerance."""
    t, n = report.timings, report.numerics
    err = t.max_abs_err if t and t.max_abs_err is not None else float("nan")
    if n is not None:
        worst = [o.compiled_vs_eager for o in n.outputs if o.compiled_vs_eager is not None]
        err = max(worst) if worst else err
        return Rule("fail-on-mismatch", 0, err, n.verdict in PASSING, message=n.verdict)
    return Rule("fail-on-mismatch", 0, err, bool(t and t.outputs_match))


ANY_RUN = frozenset({"model", "trace"})
# sites, not occurrences: one print hit on every recompile is one thing to fix; a budget on
# what a process compiles judges a multi-rank report's worst rank (_per_process)
GATE_RULES: tuple[GateRule, ...] = (
    GateRule(
        "fullgraph", bool, "exit 1 if there is any graph break (all are reported).",
        lambda r, _: _fullgraph(r), ANY_RUN,
    ),
    GateRule(
        "max_graph_breaks", int, "exit 1 if there are more graph-break sites than this (on "
        "any one rank).",
        _per_process("max-graph-breaks", "unique_graph_breaks"), ANY_RUN,
    ),
    GateRule(
        "max_recompiles", int, "exit 1 if there are more recompiles than this (on any one "
        "rank).",
        _per_process("max-recompiles", "recompiles"), ANY_RUN | {"sweep"},
    ),
    GateRule(
        "max_compile_time", float, "exit 1 if the compile time is over this many seconds "
        "(every frame; several ranks: the slowest rank's).",
        _per_process("max-compile-time", "compile_time_s"), ANY_RUN | {"sweep"},
    ),
    GateRule(
        "max_recompiles_after_warmup", int, "(with a request stream) exit 1 if the plan's "
        "warm-up leaves more held-out requests than this that compile under "
        "fail_on_recompile or (CUDA graphs) record a CUDA graph, or the plan could not be "
        "checked.",
        lambda r, limit: _after_warmup(r, limit), frozenset({"sweep"}),
    ),
    GateRule(
        "min_speedup", float, "exit 1 if the measured speed-up is below this.", _speedup,
        frozenset({"timings"}),
    ),
    GateRule(
        "fail_on_mismatch", bool, "exit 1 if compiled outputs differ from eager beyond a "
        "float64 reference's tolerance (random numbers only, or compiled the nearer to float64, "
        "pass).", _outputs, frozenset({"model"}), former="check_outputs",
    ),
    GateRule(
        "fail_on_divergence", bool, "exit 1 if ranks compile or run different graphs (breaks, "
        "recompiles, graphs, compile time); a slow rank is --max-wait-share's.",
        lambda r, _: _rule("divergence", 0, len(r.divergence)), frozenset({"trace"}),
    ),
    GateRule(
        "max_wait_share", float, "(run, several ranks) exit 1 if a rank waits for another "
        "longer than this share of its step (0.2: a fifth), measured in the window's steps.",
        lambda r, limit: _wait_share(r, limit), frozenset({"trace"}),
    ),
)  # fmt: skip


def _after_warmup(report: Report, limit: float) -> Rule:
    """The requests that would compile after the plan's warm-up, in fresh processes, and
    under CUDA graphs those that recorded one (a capture in a request's time); a plan not
    checked (none bounded the stream, or a check failed) fails: nothing says it holds."""
    s = report.serving
    if s is None:  # the budget of a config file, on a run with no request stream
        return Rule("max-recompiles-after-warmup (not judged: no request stream)", limit, 0, True)
    found = s.recompiles_after_warmup
    failed = [n for n in s.notes if n.startswith("the check")]
    if found is None or failed:
        why = s.why_plan if s.plan is None else "the plan was not checked"
        return Rule("max-recompiles-after-warmup", limit, -1, False,
                    message="; ".join([why, *failed]))  # fmt: skip
    captures = len(s.cuda_graphs.recorded_after_warmup or []) if s.cuda_graphs else 0
    message = (
        f"{found} would compile and {captures} recorded a CUDA graph after the warm-up"
        if captures
        else ""
    )
    value = found + captures
    return Rule("max-recompiles-after-warmup", limit, value, value <= limit, message=message)


def _wait_share(report: Report, limit: float) -> Rule:
    """The longest wait of a rank for another, a share of its step (the window's), naming
    the rank, whom it waits for and that rank's line; a run that measured no rank's wait
    passes, and says so."""
    r = report.runtime
    waiting = [
        s for s in (r.rank_steps if r else []) if s.breakdown.communication_wait_ms is not None
    ]
    if not waiting:
        return Rule("max-wait-share", limit, 0.0, True, message="no rank's wait was measured")
    worst = max(waiting, key=lambda s: s.wait_share)
    share = round(worst.wait_share, 4)
    b = worst.breakdown
    whom = f"rank {worst.waits_for}" if worst.waits_for is not None else "the last rank"
    message = (
        f"rank {worst.rank} waits for {whom} {b.communication_wait_ms:.3g} ms of its "
        f"{b.call_ms:.3g} ms step ({share:.0%})"
    )
    fix = next((f.fix for f in r.stragglers if f.fix), "") if r else ""
    if fix and not share <= limit:
        message += f"; {fix}"
    return Rule(
        "max-wait-share", limit, share, share <= limit, rank=f"rank {worst.rank}", message=message
    )


def rules_for(runs: Iterable[str]) -> tuple[GateRule, ...]:
    """The gate rules a run of these kinds can judge."""
    kinds = set(runs)
    return tuple(r for r in GATE_RULES if r.runs & kinds)


class Budgets:
    """The gate's limits (gate rule key -> value; a switch is on when True), and a
    baseline to compare with."""

    def __init__(
        self, baseline: Report | None = None, speedup_tolerance: float = 0.10, **limits: Any
    ) -> None:
        unknown = set(limits) - {r.key for r in GATE_RULES}
        if unknown:
            raise TypeError(f"no gate rule {', '.join(sorted(unknown))}")
        self.limits = limits
        self.baseline = baseline
        self.speedup_tolerance = speedup_tolerance  # a baseline speed-up may drop this much


def evaluate(report: Report, budgets: Budgets) -> Verdict:
    rules = [
        rule.check(report, value)
        for rule in GATE_RULES
        if (value := budgets.limits.get(rule.key)) is not None and value is not False
    ]
    if rules and report.summary.compile_failures:
        # a frame torch.compile failed on is worse than a break: no budget allows it
        rules.append(_per_process("compile-failures", "compile_failures")(report, 0))
    verdict = Verdict(rules=rules)
    if budgets.baseline is not None:
        compare(report, budgets.baseline, budgets.speedup_tolerance, verdict)
    verdict.passed = all(r.passed for r in verdict.rules)
    return verdict


def _rule(name: str, limit: float, value: float) -> Rule:
    return Rule(name, limit, value, value <= limit)


def compare(report: Report, base: Report, tolerance: float, verdict: Verdict) -> None:
    """Add a rule per regression kind; list regressions and improvements in words. Sites
    and recompiles are matched across runs as `compilediag diff` matches them."""
    from compilediag.analysis.diff.compare import guard_key, site_key

    now_sites = {site_key(b): b for b in report.graph_breaks}
    old_sites = {site_key(b): b for b in base.graph_breaks}
    new, gone, moved = _apart(now_sites, old_sites)
    for b in new:
        verdict.regressions.append(f"new graph break at {b.file}:{b.line}: {b.reason} ({b.code})")
        verdict.new_sites.append(Site(b.file, b.line, b.code))
    for b in gone:
        verdict.improvements.append(
            f"graph break gone: {os.path.basename(b.file)}: {b.code} ({b.reason})"
        )
    verdict.rules.append(Rule("baseline: new break sites", 0, len(new), not new))

    now_r = {guard_key(r): r for r in report.recompiles}
    old_r = {guard_key(r): r for r in base.recompiles}
    new_r, gone_r, moved_r = _apart(now_r, old_r)
    for r in new_r:
        verdict.regressions.append(f"new recompile reason in {r.frame}: {r.failed_guard}")
    for r in gone_r:
        verdict.improvements.append(f"recompile reason gone: {r.failed_guard}")
    verdict.rules.append(Rule("baseline: new recompile reasons", 0, len(new_r), not new_r))
    verdict.notes += _renamed(moved, moved_r)

    # one process's counts (a multi-rank report's worst rank's, named), either side; sites,
    # as the headline's "4 graph breaks at 2 sites" counts them (a look read "graph breaks
    # went up: 1 → 2" beside a headline of 2 → 4 breaks)
    for name, figure in (
        ("graph-break sites", "unique_graph_breaks"),
        ("recompiles", "recompiles"),
        ("graphs", "graphs"),
    ):
        now, old = getattr(report.summary, figure), getattr(base.summary, figure)
        spread = report.summary.per_rank.get(figure) if report.summary.ranks > 1 else None
        rank = f" ({spread.max_rank}, the most of {report.summary.ranks} ranks)" if spread else ""
        if now > old:
            verdict.regressions.append(f"{name} went up: {old} → {now}{rank}")
        elif now < old:
            verdict.improvements.append(f"{name} went down: {old} → {now}{rank}")
        verdict.rules.append(
            Rule(f"baseline: {name}", old, now, now <= old, rank=spread.max_rank if spread else "")
        )

    _step(report, base, verdict)
    old_s, now_s = base.summary.speedup, report.summary.speedup
    if old_s and now_s:
        floor = old_s * (1 - tolerance)
        if now_s < floor:
            verdict.regressions.append(
                f"speed-up fell: {old_s:.2f}x → {now_s:.2f}x (tolerance {tolerance:.0%})"
            )
        elif now_s > old_s * (1 + tolerance):
            verdict.improvements.append(f"speed-up rose: {old_s:.2f}x → {now_s:.2f}x")
        verdict.rules.append(
            Rule("baseline: speedup", round(floor, 4), round(now_s, 4), now_s >= floor)
        )


def _apart(now: dict[Any, Any], old: dict[Any, Any]) -> tuple[list[Any], list[Any], list[Any]]:
    """What this run has and the baseline lacks, what the baseline has and this run lacks
    (by their keys, the file's name first), and the pairs (the baseline's, this run's) of
    one whose key differs in the file's name alone: the same in a renamed file (a look's
    fixed copy of main.py read its recompile as both new and gone)."""
    new = [k for k in now if k not in old]
    gone = [k for k in old if k not in now]
    moved = []
    for k in list(new):
        twin = next((g for g in gone if g[1:] == k[1:]), None)
        if twin is not None:
            new.remove(k)
            gone.remove(twin)
            moved.append((old[twin], now[k]))
    return [now[k] for k in new], [old[k] for k in gone], moved


def _renamed(sites: list[Any], reasons: list[Any]) -> list[str]:
    """The renamed files, in words: what of each was matched there."""
    files: dict[tuple[str, str], list[int]] = {}
    for i, pairs in enumerate((sites, reasons)):
        for was, now in pairs:
            key = (os.path.basename(was.file), os.path.basename(now.file))
            files.setdefault(key, [0, 0])[i] += 1
    out = []
    for (was, now), (n_sites, n_reasons) in files.items():
        what = [
            _plural(n, w)
            for n, w in ((n_sites, "break site"), (n_reasons, "recompile reason"))
            if n
        ]
        out.append(
            f"the baseline's {was} is {now} here: {' and '.join(what)} matched there by "
            "code and reason, not by the file's name"
        )
    return out


# a `run` step may grow this much against its baseline's (two runs of one job on one
# machine differ by 10-20%: bench/results/gpu_try_fixes)
STEP_TOLERANCE = 0.2


def _step(report: Report, base: Report, verdict: Verdict) -> None:
    """A `run` job's step (the window's median) against the baseline's, with what bounds
    each: a step longer beyond STEP_TOLERANCE fails; the verdict, where it moved, is said."""
    now_job, old_job = report.runtime, base.runtime
    if now_job is None or old_job is None:
        return
    old, now = old_job.step_medians.get("step"), now_job.step_medians.get("step")
    if not old or not now:
        return
    nb, ob = now_job.bound, old_job.bound
    bound = (
        f"; bound by {ob.part} → {nb.part}" if nb and ob and nb.part != ob.part
        else f"; bound by {nb.part}" if nb else ""
    )  # fmt: skip
    words = f"a step {ms(old)} → {ms(now)}{bound}"
    limit = old * (1 + STEP_TOLERANCE)
    if now > limit:
        verdict.regressions.append(f"{words} (tolerance {STEP_TOLERANCE:.0%})")
    elif now < old * (1 - STEP_TOLERANCE):
        verdict.improvements.append(words)
    verdict.rules.append(
        Rule("baseline: step ms", round(limit, 4), round(now, 4), now <= limit, message=words)
    )


def exit_code(verdict: Verdict) -> int:
    return OK if verdict.passed else GATE_FAILED
