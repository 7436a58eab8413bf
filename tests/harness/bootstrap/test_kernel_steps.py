"""The kernel profile's steps: one that took over 3x the others is left out of its rows, as
one that held other work is (look 26: pytorch/examples' DCGAN on an H200 saved its sample
images in step 34, one of the kernel profile's; their copies and grid ops read as 17% of
a step's eager ops, with "compute them in the compiled forward" for the advice)."""

from __future__ import annotations

from compilediag.analysis.step.other_work import STALL
from compilediag.harness.bootstrap._compilediag_runtime.kernel_window import _stalled
from compilediag.report.model import Runtime

# the job's own clock at its first optimizer's step (torch 2.11, an H200), steps 31-36 but
# 33 (its checkpoint, held): seconds
DCGAN = [(31, 0.02174), (32, 0.02126), (34, 0.16463), (35, 0.02146), (36, 0.0215)]


def test_a_kernel_step_over_3x_the_others_is_left_out() -> None:
    assert _stalled(DCGAN) == [34]
    # steps that alternate (half of them slow): the steps just differ, none is left out
    alternating = [(n, 0.005 if n % 2 else 0.02) for n in range(10, 16)]
    assert _stalled(alternating) == []
    # a step of microseconds 3x the others is no stall (under 5 ms more)
    assert _stalled([(1, 0.0001), (2, 0.0001), (3, 0.0009), (4, 0.0001)]) == []


def test_the_left_out_kernel_step_is_said() -> None:
    from compilediag.render.table.facts import kernel_steps_said

    r = Runtime(kernel_step_ms=21.5, kernel_step_numbers=[31, 32, 35, 36],
                kernel_steps_held=[33], kernel_steps_stalled=[34])  # fmt: skip
    said = kernel_steps_said(r, None)
    assert "step 33 left out (an evaluation, a checkpoint or a compile in it)" in said, said
    assert f"step 34 left out (over {STALL:g}x the others: the job's own work, or a pause)" in said
