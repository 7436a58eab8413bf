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
