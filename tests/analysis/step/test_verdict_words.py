"""The verdict's words say only what the run has (#68: "On one GPU the report says
'waiting for another rank'"): the host's verdict sets apart a rank's wait only where one
was measured, and the loop's own work only where the loop's lines hold some."""

from __future__ import annotations

from compilediag.analysis.step.verdict import _device_or_host
from compilediag.report.model import Breakdown, KernelTiming, LoopLine, Runtime, Timings
from tests.render.test_render import fixed_report


def test_one_process_is_never_said_to_wait_for_another_rank() -> None:
    report = fixed_report()
    report.timings = Timings(kernels=[KernelTiming("k", "device", 1, 2.0, 0.2)])
    job = Runtime(
        loop=[LoopLine("t.py", 5, 3.0, "main", "make_batch", "x = make_batch()")],
        loop_steps=[3, 4], loop_step_ms=10.0,
    )  # fmt: skip
    alone = _device_or_host(report, job, Breakdown(10.0, 1.0, 0.0, 9.0, 5))
    assert alone is not None and alone.part == "host"
    assert "in the loop's own work apart" in alone.why and "another rank" not in alone.why
    ranks = Breakdown(10.0, 1.0, 0.0, 9.0, 5, communication_wait_ms=2.0)
    waited = _device_or_host(report, job, ranks)
    assert waited is not None and "waiting for another rank and in the loop's own" in waited.why
    assert "apart" not in (_device_or_host(report, Runtime(), Breakdown(10.0, 1, 0, 9, 5)).why)


def test_a_part_close_behind_the_verdict_is_said_and_a_flip_between_them_is_no_change() -> None:
    """A new user's look saw "bound by compute" in one run and "optimizer" in the next, the
    job's clock giving the two parts within 3% of each other: the part within BOUND_CLOSE of
    the verdict's share is said beside it, and a diff of two runs that each had the other
    close behind calls the flip the same. A part further behind is not said."""
    from compilediag.analysis.diff.timings import timing_changes
    from compilediag.analysis.step.verdict import bound_of
    from compilediag.render.views import bound_words
    from compilediag.report.step import BOUND_CLOSE

    report = fixed_report()
    job = Runtime(optimizer="AdamW", optimizer_options={"foreach": False})
    close = Breakdown(10.0, 1.0, 0.0, 1.0, 5, backward_ms=1.0, optimizer_ms=3.3, data_ms=3.2)
    bound = bound_of(report, job, close, cuda=False)
    assert bound is not None and (bound.part, bound.close) == ("optimizer", "data"), bound
    assert bound.close_share >= BOUND_CLOSE * bound.share
    said = bound_words(bound)
    assert said.startswith("optimizer, 33% of the step") and "; data close behind, 32%" in said
    apart = Breakdown(10.0, 1.0, 0.0, 2.5, 5, backward_ms=1.0, optimizer_ms=3.3, data_ms=2.2)
    far = bound_of(report, job, apart, cuda=False)
    assert far is not None and far.close == "" and "close behind" not in bound_words(far)

    # the next run: data first, the optimizer close behind it
    flipped = Breakdown(10.0, 1.0, 0.0, 1.0, 5, backward_ms=1.0, optimizer_ms=3.2, data_ms=3.3)
    a, b = fixed_report(), fixed_report()
    for r, breakdown in ((a, close), (b, flipped)):
        r.runtime = Runtime(optimizer="AdamW", optimizer_options={"foreach": False})
        r.timings = Timings(breakdown=breakdown)
        r.runtime.bound = bound_of(r, r.runtime, breakdown, cuda=False)
    (flip,) = [c for c in timing_changes(a, b, 0.1) if "bound by" in c.text]
    assert flip.kind == "same" and "the other close behind" in flip.text, flip
    # a run where data leads by far: the optimizer not close behind it, a change
    data = Breakdown(10.0, 1.0, 0.0, 1.0, 5, backward_ms=1.0, optimizer_ms=2.0, data_ms=5.0)
    b.timings = Timings(breakdown=data)
    b.runtime.bound = bound_of(b, b.runtime, data, cuda=False)
    assert b.runtime.bound is not None and b.runtime.bound.part == "data"
    (flip,) = [c for c in timing_changes(a, b, 0.1) if "bound by" in c.text]
    assert flip.kind == "changed", flip


def test_a_cpu_verdict_says_where_other_processes_kept_the_jobs_cores_busy(monkeypatch) -> None:
    """A look read "bound by compute, 96% of the step" at 92 ms a step that took 3.3-5 ms
    with one thread or quiet cores (#76, the thirteenth look's U3): the verdict says what
    was busy beside the job's threads, and the count the free cores take."""
    from compilediag.analysis.step.verdict import bound_of

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    report = fixed_report()
    b = Breakdown(10.0, 9.0, 0.0, 1.0, 5)
    busy = bound_of(report, Runtime(window_load=[3.0, 2.0, 2.0], beside_cores=1.0), b, False)
    assert busy is not None and busy.part == "compute"
    assert "the cores were busy (load 1.0 beside this run on 2 cores" in busy.why, busy.why
    assert "for 2 threads" in busy.why and "set OMP_NUM_THREADS=1" in busy.why
    assert "every step wait" in busy.why
    quiet = bound_of(report, Runtime(window_load=[2.0, 2.0, 2.0], beside_cores=0.1), b, False)
    assert quiet is not None and "busy" not in quiet.why
    older = bound_of(report, Runtime(window_load=[3.0, 2.0], beside_cores=1.0), b, False)
    assert older is not None and "busy" not in older.why  # no thread count read: not said
    one = bound_of(report, Runtime(window_load=[3.0, 2.0, 1.0], beside_cores=1.0), b, False)
    assert one is not None and "busy" not in one.why  # one thread fits beside a busy core
    # the job's own environment set the count (the 4th: OMP_NUM_THREADS, 0 where unset):
    # said as the user's, not this process's environment
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    theirs = bound_of(report, Runtime(window_load=[3.0, 2.0, 2.0, 2.0], beside_cores=1.0), b, False)
    assert theirs is not None and "OMP_NUM_THREADS=2" in theirs.why, theirs.why
    unset = bound_of(report, Runtime(window_load=[3.0, 2.0, 2.0, 0.0], beside_cores=1.0), b, False)
    assert unset is not None and "set OMP_NUM_THREADS=1" in unset.why, unset.why


def test_the_transfers_share_is_said_with_the_figures_it_is_made_of() -> None:
    """Look 27 (pytorch/examples' DDP tutorial on gloo, 2 ranks): "bound by communication,
    42% of the step: ... 42% of the kernel profile's step of 3.75 ms (their waits for other
    ranks apart)" beside "gloo:all_reduce 1.9 ms a step (50.7%)" and a wait of 0.155 ms of a
    1.74 ms step: the user could not make 42% of them. The share says what it is made of."""
    from compilediag.analysis.step.verdict import _communication
    from compilediag.report.model import Breakdown, Runtime

    b = Breakdown(call_ms=1.74, in_graphs_ms=0.137, between_graphs_ms=0.0, outside_ms=0.254,
                  calls=19, communication_ms=1.9, communication_exposed_ms=1.9,
                  communication_wait_ms=0.155)  # fmt: skip
    found = [x for x in _communication(Runtime(kernel_step_ms=3.75), b) if x is not None]
    (bound,) = [x for x in found if x.part == "communication"]
    assert bound.why == (
        "collectives' transfers with no compute beside them: 42% of the kernel profile's step "
        "of 3.75 ms (51% exposed, less the 9% of the window's step spent waiting for other "
        "ranks)"
    ), bound.why
