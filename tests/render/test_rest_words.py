"""What the rest of a `run` step holds, in words (#76): a value read is a wait for the device
only where a GPU ran the steps; fewer than one a step is said as one every N steps, never
"0.2 value reads"."""

from __future__ import annotations

from compilediag.render.window_words import rest_named
from compilediag.report.model import Breakdown, RestPart
from compilediag.report.vocabulary import RestKind


def _rest(calls: float) -> Breakdown:
    read = RestPart("aten::item", RestKind.SYNC, "a value read", calls, 0.02)
    return Breakdown(call_ms=1.0, in_graphs_ms=0.5, between_graphs_ms=0.0, outside_ms=0.3,
                     calls=10, rest=[read])  # fmt: skip


def test_a_cpu_runs_value_reads_wait_for_no_device() -> None:
    assert rest_named(_rest(0.2), device=False) == (
        "; a value read (.item(), float()) every 5 steps, outside the model, backward and the "
        "optimizer (aten::item: 0.020 ms on the host)"
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


def test_a_read_fewer_steps_make_than_were_profiled_is_counted_over_them() -> None:
    """A job that reads loss.item() once an epoch, its kernel profile over 2 steps across an
    epoch's end: 1 read in those 2 steps, not "every 2 steps" of a window that made none
    (#76, the seventh look)."""
    said = rest_named(_rest(0.5), device=False, profiled=[61, 62])
    assert said.startswith(
        "; 1 value read (.item(), float()) in the kernel profile's 2 steps (steps 61, 62), "
        "not each step, outside the model, backward and the optimizer"
    ), said
    assert "every" not in said
    assert rest_named(_rest(3), device=False, profiled=[61, 62]).startswith("; 3 value reads")


def test_reads_that_differ_between_the_profiled_steps_are_counted_over_them() -> None:
    """Two loss.item() a step, and an epoch's one-batch step among the kernel profile's: 9
    reads over its 5 steps, said as such, not "1.8 value reads a step" beside the window's
    steps it was not counted over (#76, the thirteenth look's U5)."""
    said = rest_named(_rest(1.8), device=False, profiled=[18, 20, 21, 22, 23])
    assert said.startswith(
        "; 9 value reads (.item(), float()) in the kernel profile's 5 steps (steps 18, 20-23), "
        "outside the model, backward and the optimizer ("
    ), said
    assert "1.8" not in said and "not each step" not in said
    assert rest_named(_rest(2.0), device=False, profiled=[18, 20]).startswith(
        "; 2 value reads (.item(), float()) a step"
    )


def test_one_call_of_a_steps_other_work_is_said_in_the_singular() -> None:
    """A look read "checkpoint 1 time ... 1 torch.save calls" (#76, nanoGPT)."""
    from compilediag.analysis.step.other_work import _calls
    from compilediag.report.step import StepWork

    assert _calls(StepWork("checkpoint", "save", "t.py", 3, calls=1)) == "1 torch.save call"
    assert _calls(StepWork("checkpoint", "save", "t.py", 3, calls=2)) == "2 torch.save calls"
    said = _calls(StepWork("evaluation", "estimate_loss", "t.py", 3, calls=1))
    assert said == "1 call of the compiled model"


def test_ops_of_about_all_the_rest_are_set_on_it_as_shares() -> None:
    """Look 26 (regression, a 0.3 ms step): "the rest 0.083 ms (of it, about all, by
    torch.profiler's own steps: eager ops outside graphs 0.101 ms ...)", a part larger than
    the whole it is of. The kernel profile's steps, over the rest but within the steps'
    difference, give the ops' shares of it, set on the rest."""
    ops = [RestPart("aten::mul", RestKind.EAGER, "eager", 2, 0.0606),
           RestPart("aten::add_", RestKind.EAGER, "eager", 2, 0.0404)]  # fmt: skip
    b = Breakdown(call_ms=0.3, in_graphs_ms=0.1, between_graphs_ms=0.0, outside_ms=0.083,
                  calls=10, rest=ops)  # fmt: skip
    said = rest_named(b, device=False)
    assert said == (
        " (of it, about all, by the shares of torch.profiler's own steps: eager ops outside "
        "graphs 0.083 ms: aten::mul 0.050 ms, aten::add_ 0.033 ms)"
    ), said
    # within the rest, the profiler's own figures, as read
    b.outside_ms = 0.2
    assert rest_named(b, device=False) == (
        " (of it: eager ops outside graphs 0.101 ms: aten::mul 0.061 ms, aten::add_ 0.040 ms)"
    )
