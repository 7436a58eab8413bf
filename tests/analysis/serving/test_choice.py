"""The plan chosen by what the run measured (analysis/serving/forecast.py): of the plans
that bound the compiles, the smallest change unless another is faster beyond SAME_SPEED;
never one that left a request eager, made a graph for most shapes, or rests on automatic
dynamic's order-dependent graphs; none where no plan bounds them, and the gate fails."""

from __future__ import annotations

from compilediag.analysis.serving.forecast import SAME_SPEED, bounded, choose
from compilediag.gate import GATE_RULES
from compilediag.report.model import Environment, Report, TargetInfo
from compilediag.report.serving import HeldOut, Latency, PaddingCheck, Plan, Serving


def _plan(kind: str, graphs: int, median: float, eager: int = 0) -> Plan:
    return Plan(kind, graphs=graphs, eager_requests=eager, latency=Latency(median, median, 10))


def _serving(*plans: Plan, distinct: int = 10) -> Serving:
    return Serving(requests=20, distinct_shapes=distinct, fit_shapes=distinct, plans=list(plans))


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


def _held(p: Plan, raised: int = 0, without: int = 0, requests: int = 12) -> Plan:
    p.held_out = HeldOut(requests, raised=list(range(29, 29 + raised)),
                         without_cuda_graph=list(range(29, 29 + without)))  # fmt: skip
    return p


def test_the_held_out_counts_choose_first_then_the_smallest_change() -> None:
    """#75: a plan whose warm-up left held-out requests without a CUDA graph loses to one
    that held them all, however small a change it is; among those that held as many, the
    smallest change; why_plan says so with the counts."""
    marks = _held(_plan("mark_dynamic", 1, 0.22), without=5)
    buckets = _held(_plan("bucket", 3, 0.19))
    buckets.padding = PaddingCheck(requests=20)
    s = choose(_serving(marks, buckets, _held(_plan("dynamic", 1, 0.2), without=5)))
    assert s.plan is buckets
    assert s.why_plan.startswith("buckets: its warm-up held 12 of the 12 held-out requests")
    assert "mark_dynamic 7" in s.why_plan and "dynamic=True 7" in s.why_plan
    assert s.why_plan.endswith("the only one that held as many")
    # all held alike: the smallest change, and the words say why
    s = choose(_serving(_held(_plan("mark_dynamic", 1, 0.22)), _held(_plan("dynamic", 1, 0.2))))
    assert s.plan is not None and s.plan.kind == "mark_dynamic"
    assert "the smallest change of those that held as many" in s.why_plan


def test_buckets_whose_padding_changed_the_outputs_are_never_the_plan() -> None:
    """A model that averages over its padding: buckets are left out even where they alone
    held the held-out requests, and a note names the output that changed."""
    buckets = _held(_plan("bucket", 3, 0.19))
    buckets.padding = PaddingCheck(requests=20, changed=20, worst="output 0 of request 3 "
                                   "(1x9, 1x9) changed by up to 0.41 once padded")  # fmt: skip
    s = choose(_serving(_held(_plan("mark_dynamic", 1, 0.22), without=5), buckets))
    assert s.plan is not None and s.plan.kind == "mark_dynamic"
    assert s.bounded == ["mark_dynamic"]
    (note,) = [n for n in s.notes if n.startswith("buckets are no plan here")]
    assert "20 of 20 distinct requests" in note and "by up to 0.41" in note
    s = choose(_serving(_plan("as_is", 8, 1.0, eager=3), buckets))
    assert s.plan is None and s.why_plan


def test_latency_decides_only_where_the_paired_interval_separates_the_plans() -> None:
    """The same requests timed under each plan, in order: a later plan 30% faster on every
    request wins; one whose pairs spread from 0.5x to 1.4x does not, whatever its median."""
    marks = _plan("mark_dynamic", 1, 1.0)
    marks.request_ms = [1.0, 1.1, 0.9, 1.0, 1.05, 0.95]
    clear = _plan("dynamic", 1, 0.7)
    clear.request_ms = [x * 0.7 for x in marks.request_ms]
    assert choose(_serving(marks, clear)).plan is clear
    noisy = _plan("dynamic", 1, 0.6)
    noisy.request_ms = [
        x * r for x, r in zip(marks.request_ms, [0.5, 1.4, 0.5, 1.3, 0.5, 0.6], strict=True)
    ]
    assert choose(_serving(marks, noisy)).plan is marks


def test_a_plan_measured_while_the_machine_was_busy_does_not_lose_for_it() -> None:
    """The plans are measured one after another: the marks' pass ran beside another job (its
    requests and the eager model beside them both 10x slower), dynamic=True's did not. Over
    their eager references they are alike: the smallest change stays the plan (before, the
    raw times chose dynamic=True: BERT's stream here, 152 ms against 13.1 ms, eager 10 ms)."""
    quiet = [10.0, 11.0, 9.5, 10.2, 10.8, 9.9]
    marks = _plan("mark_dynamic", 1, 150.0)
    marks.request_ms = [x * 15 for x in quiet]
    marks.reference_ms = [x * 10 * 1.5 for x in quiet]  # the eager model, as slowed
    dynamic = _plan("dynamic", 1, 13.0)
    dynamic.request_ms = [x * 1.0 for x in quiet]
    dynamic.reference_ms = list(quiet)
    s = choose(_serving(marks, dynamic))
    assert s.plan is marks and "the smallest change" in s.why_plan
    # without the references, the raw times would have chosen the other
    marks.reference_ms, dynamic.reference_ms = [], []
    assert choose(_serving(marks, dynamic)).plan is dynamic
