"""What the rest of a `run` step holds, in words (#76): a value read is a wait for the device
only where a GPU ran the steps; fewer than one a step is said as one every N steps, never
"0.2 value reads"."""

from __future__ import annotations

from compilediag.render.views import rest_named
from compilediag.report.model import Breakdown, RestPart
from compilediag.report.vocabulary import RestKind


def _rest(calls: float) -> Breakdown:
    read = RestPart("aten::item", RestKind.SYNC, "a value read", calls, 0.02)
    return Breakdown(call_ms=1.0, in_graphs_ms=0.5, between_graphs_ms=0.0, outside_ms=0.3,
                     calls=10, rest=[read])  # fmt: skip


def test_a_cpu_runs_value_reads_wait_for_no_device() -> None:
    assert rest_named(_rest(0.2), device=False) == (
        "; a value read (.item(), float()) every 5 steps (aten::item: 0.020 ms on the host)"
    )
    assert rest_named(_rest(3), device=False).startswith(
        "; 3 value reads (.item(), float()) a step"
    )
    assert "device" not in rest_named(_rest(3), device=False)


def test_a_gpu_runs_value_reads_are_waits_for_the_device() -> None:
    assert rest_named(_rest(1), device=True).startswith(
        "; 1 value read or wait for the device a step"
    )
    assert rest_named(_rest(2), device=True).startswith("; 2 value reads or waits for the device a")
