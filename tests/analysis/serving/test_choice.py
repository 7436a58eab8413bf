"""The plan chosen by what the run measured (analysis/serving/forecast.py): of the plans
that bound the compiles, the smallest change unless another is faster beyond SAME_SPEED;
never one that left a request eager, made a graph for most shapes, or rests on automatic
dynamic's order-dependent graphs; none where no plan bounds them, and the gate fails."""

from __future__ import annotations

from compilediag.analysis.serving.forecast import SAME_SPEED, bounded, choose
from compilediag.gate import GATE_RULES
from compilediag.report.model import Environment, Report, TargetInfo
from compilediag.report.serving import Latency, Plan, Serving


def _plan(kind: str, graphs: int, median: float, eager: int = 0) -> Plan:
    return Plan(kind, graphs=graphs, eager_requests=eager, latency=Latency(median, median, 10))


def _serving(*plans: Plan, distinct: int = 10) -> Serving:
    return Serving(requests=20, distinct_shapes=distinct, plans=list(plans))


def test_the_smallest_change_unless_another_is_clearly_faster() -> None:
    slower = 1.0
    s = choose(_serving(_plan("as_is", 8, 2.0, eager=3), _plan("mark_dynamic", 1, slower),
                        _plan("bucket", 3, slower * (1 - SAME_SPEED / 2)), _plan("dynamic", 1, slower)))  # fmt: skip
    assert s.plan is not None and s.plan.kind == "mark_dynamic"
    assert s.bounded == ["mark_dynamic", "bucket", "dynamic"]  # as is left 3 requests eager
    s = choose(
        _serving(
            _plan("mark_dynamic", 1, slower), _plan("dynamic", 1, slower * (1 - 2 * SAME_SPEED))
        )
    )
    assert s.plan is not None and s.plan.kind == "dynamic"


def test_buckets_are_said_faster_but_chosen_only_where_nothing_else_bounds() -> None:
    """Padding changes what a model computes unless it masks the padding, which the run
    cannot tell: faster buckets are said beside the plan; alone, they are the plan."""
    s = choose(_serving(_plan("mark_dynamic", 1, 1.0), _plan("bucket", 3, 0.5)))
    assert s.plan is not None and s.plan.kind == "mark_dynamic" and s.faster_padded
    s = choose(_serving(_plan("mark_dynamic", 1, 1.0), _plan("bucket", 3, 0.95)))
    assert not s.faster_padded
    s = choose(_serving(_plan("as_is", 8, 1.0, eager=3), _plan("bucket", 3, 1.0)))
    assert s.plan is not None and s.plan.kind == "bucket"


def test_automatic_dynamic_is_no_plan_where_a_plan_applies() -> None:
    """As you compile it, 3 graphs by automatic dynamic over 10 shapes: their sizes depend on
    the order the sizes come in, so the explicit marks are the plan; alone (nothing varies
    that a plan could mark), one graph is."""
    s = choose(_serving(_plan("as_is", 3, 1.0), _plan("mark_dynamic", 2, 1.0)))
    assert s.plan is not None and s.plan.kind == "mark_dynamic"
    assert bounded(_plan("as_is", 1, 1.0), 10, 1)
    assert not bounded(_plan("mark_dynamic", 9, 1.0), 10, 2)  # a graph for most shapes


def test_no_plan_bounds_the_compiles_and_the_gate_fails() -> None:
    s = choose(_serving(_plan("as_is", 8, 1.0, eager=3), _plan("bucket", 6, 1.0)))
    assert s.plan is None and "no plan bounded the compiles" in s.why_plan
    report = Report(tool={}, environment=Environment(), target=TargetInfo(path="m.py"), serving=s)
    rule = next(r for r in GATE_RULES if r.key == "max_recompiles_after_warmup")
    judged = rule.check(report, 0)
    assert not judged.passed and "no plan bounded" in judged.message
    report.serving = None  # a config file's budget, on a run with no stream
    assert rule.check(report, 0).passed
