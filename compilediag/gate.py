"""Rules -> verdict -> exit code. Pure: reads a Report, never torch."""

from __future__ import annotations

from dataclasses import dataclass

from compilediag.errors import GATE_FAILED, OK
from compilediag.report import Report, Rule, Verdict


@dataclass
class Budgets:
    fullgraph: bool = False
    max_graph_breaks: int | None = None
    max_recompiles: int | None = None

    def any(self) -> bool:
        return (
            self.fullgraph or self.max_graph_breaks is not None or self.max_recompiles is not None
        )


def evaluate(report: Report, budgets: Budgets) -> Verdict:
    rules: list[Rule] = []
    s = report.summary
    breaks_limit = 0 if budgets.fullgraph else budgets.max_graph_breaks
    if budgets.fullgraph and budgets.max_graph_breaks is not None:
        breaks_limit = min(0, budgets.max_graph_breaks)
    if breaks_limit is not None:
        name = "fullgraph" if budgets.fullgraph else "max-graph-breaks"
        # sites, not occurrences: one print hit on every recompile is one thing to fix
        rules.append(
            Rule(name, breaks_limit, s.unique_graph_breaks, s.unique_graph_breaks <= breaks_limit)
        )
    if budgets.max_recompiles is not None:
        rules.append(
            Rule(
                "max-recompiles",
                budgets.max_recompiles,
                s.recompiles,
                s.recompiles <= budgets.max_recompiles,
            )
        )
    return Verdict(passed=all(r.passed for r in rules), rules=rules)


def exit_code(verdict: Verdict) -> int:
    return OK if verdict.passed else GATE_FAILED
