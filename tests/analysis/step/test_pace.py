"""The job's own pace (#74): a `run` window's figures are set on the steps around it, which
ran with no part, line or kernel instrument; a step is a median, its parts shares of it; a
stall a busy machine made is named and left out; the first screen says how fast the window
ran against the job's own pace.

The unit tests give the analysis a process's figures as the probe writes them; the
end-to-end test runs a training step of about a millisecond
(tests/fixtures/run_jobs/one_ms_step.py), which times its own steps."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import pytest

from compilediag.analysis.step.other_work import stalled_steps
from compilediag.analysis.step.pace import MIN_AROUND, at_pace, pace_of, steady
from compilediag.harness.worker_types import ProcessRuntime, Profiled, RegionTime
from compilediag.render.window_words import pace_line
from compilediag.report.model import Runtime
from tests.conftest import ROOT, measured_twice, run_cli

# each step's row: the step, forward, backward, optimizer, data, the rest, evaluation
ROW = [1.1, 0.3, 0.4, 0.3, 0.0, 0.1, 0.0]


def _process(
    rows: dict[int, list[float]], around: dict[int, float], shapes: str = ""
) -> ProcessRuntime:
    numbers = sorted(rows)
    n = len(numbers)
    profiled = Profiled(
        calls=n, call_ms=sum(rows[k][0] for k in numbers) / n, outside_ms=0.1,
        backward_ms=0.4, optimizer_ms=0.3, per_step=[rows[k] for k in numbers],
        step_numbers=numbers, regions=[RegionTime("0/0", 0.3, 0.0, 0.2, 0.0)],
        step_regions=[{"0/0": [0.3, 0.0, 0.2, 0.0]} for _ in numbers],
    )  # fmt: skip
    entry = [[k, 7, shapes, True, k == 1, 0.3, 4] for k in [1, *numbers, *around]] if shapes else []
    return ProcessRuntime(
        pid=1, rank=None, argv=[], calls={"0/0": n}, profiled=profiled,
        plain_steps=sorted(around), plain_step_ms=[around[k] for k in sorted(around)],
        entry_calls=entry,
    )  # fmt: skip


def test_the_windows_figures_are_shares_of_a_step_set_on_the_jobs_pace() -> None:
    """The window's steps ran 1.1 ms under its instruments, the 20 steps around it 1.0 ms:
    the step is 1.0 ms, each part its share of it (forward 0.3/1.1 of it), the cost 10%."""
    p = _process(
        {k: list(ROW) for k in range(20, 31)}, {k: 1.0 for k in [*range(5, 15), *range(40, 50)]}
    )
    pace = pace_of(p, set(), alike=True)
    assert (pace.window_ms, pace.around_ms, pace.around) == (1.1, 1.0, 20)
    assert pace.cost == pytest.approx(0.1)
    kept, by = at_pace(p, set(), pace)
    assert by == pytest.approx(1.0 / 1.1)
    assert kept.call_ms == pytest.approx(1.0, abs=1e-5)
    assert kept.per_step[0][1] == pytest.approx(0.3 / 1.1)  # forward's share kept
    assert kept.regions[0].graph_ms == pytest.approx(0.3 / 1.1)
    assert sum(kept.per_step[0][1:6]) == pytest.approx(kept.per_step[0][0], abs=1e-5)
    # too few steps around it, or steps of other work: the window's own median, unscaled
    few = _process(
        {k: list(ROW) for k in range(20, 31)}, {k: 1.0 for k in range(5, 5 + MIN_AROUND - 1)}
    )
    pace = pace_of(few, set(), alike=True)
    assert pace.cost is None and pace.step_ms == pytest.approx(1.1)
    assert at_pace(few, set(), pace)[0].call_ms == pytest.approx(1.1)
    assert pace_of(p, set(), alike=False).cost is None


def test_a_busy_machines_stalls_are_named_and_the_step_is_a_median() -> None:
    """On a busy machine (load 3 on 2 cores) 3 of 11 steps of 1.5 ms stalled 30-50 ms, their
    excess spread over every part, at the steps' usual shapes: stalls, left out; the step is
    the window's median. Without the shapes a step whose parts all grew is a longer batch,
    and stays (test_step_story)."""
    rows = {k: [1.5, 0.4, 0.5, 0.4, 0.0, 0.2, 0.0] for k in range(20, 31)}
    for k, total in ((22, 30.0), (25, 50.0), (29, 40.0)):
        rows[k] = [total, total * 0.25, total * 0.35, total * 0.25, 0.0, total * 0.15, 0.0]
    around = {k: 1.5 for k in [*range(5, 15), *range(40, 50)]}
    busy = _process(rows, around, shapes="64x64")
    stalled = stalled_steps([busy], set())
    assert sorted(stalled) == [22, 25, 29]
    pace = pace_of(busy, set(stalled), alike=True)
    kept, _ = at_pace(busy, set(stalled), pace)
    assert kept.call_ms == pytest.approx(1.5) and len(kept.per_step) == 8
    # the same steps with no shapes known: not told from a longer batch, kept; the step is
    # still set on the median, never the mean the stalls make (11.5 ms)
    unknown = _process(rows, around)
    assert stalled_steps([unknown], set()) == {}
    kept, _ = at_pace(unknown, set(), pace_of(unknown, set(), alike=True))
    assert kept.call_ms == pytest.approx(1.5)
    # --try-fixes judges each run by its steady steps alike
    assert [r[0] for r in steady(unknown.profiled.per_step)] == [1.5] * 8  # type: ignore[union-attr]


def test_the_pace_line_says_what_the_figures_are_set_on() -> None:
    r = Runtime(window=[20, 30], window_step_ms=1.1, unprofiled_step_ms=1.0,
                unprofiled_steps=20, at_pace=True, window_cost=0.1)  # fmt: skip
    assert pace_line(r) == (
        "pace: the window 1.1 ms a step, 1.10x the job's own 1 ms (20 steps around it, no "
        "instrument on); the figures below are set on the job's pace"
    )
    # three significant digits, as every ratio (a look read "42.60x")
    slow = Runtime(window=[20, 30], window_step_ms=42.6, unprofiled_step_ms=1.0,
                   unprofiled_steps=20, at_pace=True, window_cost=41.6)  # fmt: skip
    assert "a step, 42.6x the job's own" in pace_line(slow), pace_line(slow)
    few = Runtime(window=[20, 30], window_step_ms=1.1, unprofiled_steps=2)
    assert "too few steps around it" in pace_line(few)
    assert "its instruments on" in pace_line(few)
    # look 26 (regression, window 3-7, its kernel profile after it): "too few steps around
    # it" beside "the kernel profile's steps ... 1.8x the steps around the window" (the
    # other steps timed): the pace says which side it lacked, the profile what it counts
    few.kernel_step_numbers, few.kernel_step_ms, few.unprofiled_step_ms = [31, 32], 2.0, 1.1
    before = "too few steps before it to set that against (those after it follow the kernel"
    assert before in pace_line(few), pace_line(few)
    from compilediag.render.views import window_notes

    (said,) = [t for label, t in window_notes(few, None) if label == "profiling"]
    assert "1.8x the 2 steps timed outside the window" in said, said
    unlike = Runtime(window=[20, 30], window_step_ms=1.1, window_work="unlike")
    assert "ran other work" in pace_line(unlike)
    assert pace_line(Runtime()) == ""


JOB = ROOT / "tests" / "fixtures" / "run_jobs" / "one_ms_step.py"


@pytest.mark.full
def test_a_one_ms_steps_report_is_at_the_jobs_own_pace(tmp_path: Path) -> None:
    """A step of about a millisecond: the report's step is within 10% of the job's own
    clock over the steps around the window (before: the window's, 1.31x the job alone);
    the pace line is on the first screen, its figures in the JSON."""

    def check() -> None:
        facts, saved = tmp_path / "facts.json", tmp_path / "report.json"
        proc = run_cli(
            "run", "--profile-steps", "20-30", "--no-kernels", "--format", "json",
            "-o", str(saved), "--", sys.executable, str(JOB),
            env={"JOB_FACTS": str(facts)}, timeout=600,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        report = json.loads(saved.read_text())
        r = report["runtime"]
        own = json.loads(facts.read_text())["step_ms"]
        step = report["timings"]["breakdown"]["call_ms"]
        shown = {k: r[k] for k in ("at_pace", "pace_moved", "window_step_ms", "before_step_ms")}
        if r["pace_moved"]:
            # a host whose pace moved during the run (a slow CI host's did): the figures are
            # the window's own, and the job's own clock says its pace moved there too
            before, after = statistics.median(own[13:18]), statistics.median(own[31:])
            assert max(before, after) / min(before, after) > 1.15, (before, after, shown)
            window = statistics.median(own[19:30])
            assert step == pytest.approx(window, rel=0.10), (step, window, shown)
        else:
            around = statistics.median(own[1:18] + own[32:])  # the job's clock, no window
            assert r["at_pace"] and r["window_step_ms"] > 0 and r["window_cost"] is not None
            assert step == pytest.approx(around, rel=0.10), (step, around, shown)
        first = run_cli("render", str(saved)).stdout.splitlines()[:4]
        assert any(line.startswith("pace: the window ") for line in first), first

    measured_twice(check)


def test_a_busy_machines_stalls_are_counted_with_its_load() -> None:
    """More than three stalls are counted with their range, and a load at the cores' count
    says the machine was busy; a quiet machine's one stall is said as a pause."""
    from compilediag.render.views import window_notes

    busy = Runtime(
        window=[20, 30], window_steps=7, window_step_ms=1.5, window_load=[2.7, 2.0],
        window_stalled={"21": 20.0, "23": 31.0, "26": 45.0, "28": 50.0},
    )  # fmt: skip
    (said,) = [text for label, text in window_notes(busy, None) if label == "stalled"]
    assert said.startswith(
        "4 of 11 steps stalled, 20 ms to 50 ms, 13-33x the window's median step (1.5 ms)"
    )
    assert said.endswith("; the machine was busy: load 2.7 on 2 cores"), said
    quiet = Runtime(window=[20, 30], window_steps=10, window_step_ms=1.5, window_load=[0.3, 2.0],
                    window_stalled={"21": 20.0})  # fmt: skip
    (said,) = [text for label, text in window_notes(quiet, None) if label == "stalled"]
    assert (
        said.startswith("step 21 took 20 ms, 13x the window's median step (1.5 ms)")
        and "a pause" in said
    )
    assert "busy" not in said


def test_a_pace_that_moved_during_the_run_is_said_and_not_set_against() -> None:
    """The 5 steps just before the window ran 1.0 ms, the window 1.05 ms, the steps after it
    2.0 ms (the host's other work started): the pace moved, so the window's cost is not
    told apart from that, and its figures are its own, not set on the steps after it."""
    around = {k: 1.0 for k in range(10, 20)} | {k: 2.0 for k in range(31, 51)}
    p = _process({k: [1.05, *ROW[1:]] for k in range(20, 31)}, around)
    p.window = [20, 30]
    pace = pace_of(p, set(), alike=True)
    assert (pace.before_ms, pace.around_ms, pace.around) == (1.0, 2.0, 20)
    assert pace.moved and not pace.at_pace and pace.cost is None
    assert pace.step_ms == pytest.approx(1.05)
    assert at_pace(p, set(), pace)[0].call_ms == pytest.approx(1.05)
    steady = {k: 1.0 for k in range(10, 20)} | {k: 1.1 for k in range(31, 51)}
    p.plain_steps, p.plain_step_ms = sorted(steady), [steady[k] for k in sorted(steady)]
    unmoved = pace_of(p, set(), alike=True)
    assert not unmoved.moved and unmoved.at_pace and unmoved.step_ms == pytest.approx(1.1)
    r = Runtime(window=[20, 30], window_step_ms=1.05, before_step_ms=1.0, pace_moved=True,
                unprofiled_step_ms=2.0, unprofiled_steps=20)  # fmt: skip
    assert pace_line(r) == (
        "pace: the window's steps took 1.05 ms (the median); the job's own pace moved during "
        "the run, 1 ms a step just before the window and 2 ms after it (no instrument on), so "
        "what the window's instruments cost is not told apart from that: the figures below "
        "are the window's, its instruments on"
    )


@pytest.mark.full
@pytest.mark.quiet  # the job's pace by its own clock: beside another test's load, it moved
def test_a_job_whose_pace_moves_is_reported_at_its_windows_own(tmp_path: Path) -> None:
    """The 1 ms job sleeping 2 ms more a step from step 34 on (after the window 20-30): the
    steps after the window are not the window's pace, so the report says the pace moved,
    with the job's own clock before the window and after it, and gives the window's own
    step (before: set on the steps after it, a step of 3 ms given for a window of 1)."""
    facts, saved = tmp_path / "facts.json", tmp_path / "report.json"
    proc = run_cli(
        "run", "--profile-steps", "20-30", "--no-kernels", "--format", "json", "-o", str(saved),
        "--", sys.executable, str(JOB), env={"JOB_FACTS": str(facts), "JOB_PACE_FROM": "34"},
        timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(saved.read_text())
    r, own = report["runtime"], json.loads(facts.read_text())["step_ms"]
    assert r["pace_moved"] and not r["at_pace"] and r["window_cost"] is None
    assert r["before_step_ms"] == pytest.approx(statistics.median(own[14:19]), rel=0.25)
    assert r["unprofiled_step_ms"] == pytest.approx(statistics.median(own[33:]), rel=0.25)
    window = statistics.median(own[19:30])  # the job's clock over the window's steps
    assert r["window_step_ms"] == pytest.approx(window, rel=0.1)
    assert report["timings"]["breakdown"]["call_ms"] == pytest.approx(r["window_step_ms"])
    first = run_cli("render", str(saved)).stdout.splitlines()[:4]
    assert any("the job's own pace moved during the run" in line for line in first), first


def test_a_window_far_from_the_steps_around_it_keeps_its_own_figures() -> None:
    """A twelfth look: the window ran 55.9 ms a step, the steps around it 19.8 ms (another
    user's work on the machine came and went), and the window's parts were set on 19.8 ms:
    its data part, 9.45 ms by the loop's own line clock and a sleep of at least 6.4 ms, read
    3.29 ms. More than 1.5x apart, either way, is far more than the instruments cost: the
    figures are the window's own, and the pace line says the machine's pace moved; 1.12x
    apart is set on the steps around it, as before."""
    around = {k: 19.8 for k in [*range(5, 15), *range(40, 50)]}
    row = [55.9, 20.0, 20.0, 3.0, 9.45, 3.45, 0.0]
    p = _process({k: list(row) for k in range(20, 31)}, around)
    p.window = [20, 30]
    pace = pace_of(p, set(), alike=True)
    assert pace.apart and not pace.at_pace and not pace.moved and pace.cost is None
    kept, by = at_pace(p, set(), pace)
    assert by == pytest.approx(1.0) and kept.data_ms == p.profiled.data_ms  # type: ignore[union-attr]
    faster = _process({k: list(row) for k in range(20, 31)}, {k: 90.0 for k in around})
    assert pace_of(faster, set(), alike=True).apart  # (the other way alike)
    near = _process({k: list(row) for k in range(20, 31)}, {k: 50.0 for k in around})
    assert not pace_of(near, set(), alike=True).apart and pace_of(near, set(), alike=True).at_pace
    r = Runtime(window=[20, 30], window_step_ms=55.9, unprofiled_step_ms=19.8,
                unprofiled_steps=20, pace_apart=True)  # fmt: skip
    assert pace_line(r) == (
        "pace: the window's steps took 55.9 ms (the median), 2.82x the job's own 19.8 ms (20 "
        "steps around it, no instrument on): more than its instruments cost, so the machine's "
        "pace moved between them (other work on it): the figures below are the window's, its "
        "instruments on"
    )
    # shape by shape alike (a twentieth look read "the window 0.0258x the job's own pace",
    # the steps around it held up 40-52 ms on a busy machine): said as the pace moving
    shapes = Runtime(window=[20, 40], window_step_ms=1.13, unprofiled_steps=44,
                     window_work="shapes", window_cost=-0.9742)  # fmt: skip
    assert pace_line(shapes) == (
        "pace: the window's steps took 1.13 ms (the median), 0.0258x the job's own shape by "
        "shape (44 steps around it, no instrument on): faster than its instruments allow, so "
        "the steps around it were held up (stalls, other work on the machine): the figures "
        "below are the window's, its instruments on"
    )
    shapes.window_cost = 0.12  # near: what the instruments cost, as before
    assert pace_line(shapes).startswith("pace: the window 1.12x the job's own pace (44 steps")


def test_after_a_kernel_profile_the_pace_is_the_steps_before_the_window() -> None:
    """The kernel profile ran steps 31-35, after the window 20-30, and the steps after it
    ran slower (torch.profiler's after-effect): the pace is the 5 steps just before the
    window, not those, and the pace did not move."""
    around = {k: 1.0 for k in range(10, 20)} | {k: 1.7 for k in range(36, 41)}
    p = _process({k: [1.05, *ROW[1:]] for k in range(20, 31)}, around)
    p.window, p.kernel_step_numbers = [20, 30], [31, 32, 33, 34, 35]
    pace = pace_of(p, set(), alike=True)
    assert (pace.around_ms, pace.around) == (1.0, MIN_AROUND)
    assert pace.at_pace and not pace.moved and pace.cost == pytest.approx(0.05)
    p.kernel_step_numbers = []  # no profile after it: the steps after the window, as before
    assert pace_of(p, set(), alike=True).around_ms == 1.7


def test_too_few_steps_on_either_side_leave_the_windows_own_figures() -> None:
    """A twenty-fourth look: 20 steps on 2 ranks, the window 5-12, the kernel profile 13-17:
    steps 2 and 3 before it (2 just after the compile, 32 ms), 18-20 after the profile (18
    still slow). The pace over those 5 read rank 1's 23.5 ms step as 24.8 ms; too few on
    either side, the window's own median stands."""
    around = {2: 32.15, 3: 24.83, 18: 28.8, 19: 22.38, 20: 22.28}
    p = _process({k: [23.5, *ROW[1:]] for k in range(5, 13)}, around)
    p.window, p.kernel_step_numbers = [5, 12], [13, 14, 15, 16, 17]
    pace = pace_of(p, set(), alike=True)
    assert pace.around == 0 and not pace.at_pace and pace.step_ms == 23.5
    # no profile after it: 5 after the window are its pace; 4, too few again
    after = {k: 22.3 for k in range(13, 18)}
    p.kernel_step_numbers, p.plain_steps = [], [2, 3, *after]
    p.plain_step_ms = [32.15, 24.83, *after.values()]
    pace = pace_of(p, set(), alike=True)
    assert (pace.around_ms, pace.around) == (22.3, 5)
    p.plain_steps, p.plain_step_ms = p.plain_steps[:-1], p.plain_step_ms[:-1]
    assert pace_of(p, set(), alike=True).around == 0


def test_steps_of_two_levels_are_not_a_window_apart_from_the_job() -> None:
    """A twenty-fourth look: the job's own clock gave steps alternating 1.8 and 6 ms, in
    the window and around it; the 5 steps before the window (the kernel profile after it)
    had a median of 6 ms, the window's 11 of 2.17 ms, and the report said 0.361x the job's
    own pace, "the steps around it were held up". Its steps vary more than its instruments
    cost: neither that nor a moved pace is said, and the figures are the window's own."""
    levels = [2.17, 6.11, 1.77, 6.03, 1.87, 6.0, 1.8, 6.05, 1.8, 6.01, 1.75]
    rows = {k: [t, *ROW[1:]] for k, t in zip(range(10, 21), levels, strict=True)}
    before = dict(zip(range(2, 9), [7.11, 2.15, 6.23, 2.1, 6.0, 1.82, 7.47], strict=True))
    after = {k: (6.0 if k % 2 else 1.8) for k in range(26, 41)}
    p = _process(rows, before | after)
    p.window, p.kernel_step_numbers = [10, 20], [21, 22, 23, 24, 25]
    pace = pace_of(p, set(), alike=True)
    assert pace.around_ms == 6.0 and pace.window_ms == pytest.approx(2.17)
    assert pace.varies and not pace.apart and not pace.moved and not pace.at_pace
    assert pace.step_ms == pytest.approx(2.17) and pace.cost is None
    r = Runtime(window=[10, 20], window_step_ms=2.17, unprofiled_step_ms=6.0, unprofiled_steps=5,
                window_spread_ms=list(pace.spread or ()))  # fmt: skip
    assert pace_line(r) == (
        "pace: the window's steps took 2.17 ms (the median), half of them between 1.8 ms and "
        "6.02 ms: they vary more than its instruments cost, so what those cost is not told "
        "from the job's own 6 ms (5 steps around it, no instrument on): the figures below are "
        "the window's, its instruments on"
    )
    # steps of one level, a few slower: a spread under APART, as before
    p.profiled.per_step = [[1.8 + 0.01 * (k % 3), *ROW[1:]] for k in range(11)]  # type: ignore[union-attr]
    assert not pace_of(p, set(), alike=True).varies


def test_a_few_slow_steps_before_the_window_are_not_a_pace_that_moved() -> None:
    """The 5 steps just before the window stalled (1.6 ms), the window ran 1.05 ms and the
    20 after it 1.0 ms: the odd steps are those before it, so the pace is the steps after
    it, as without them."""
    around = {k: 1.6 for k in range(15, 20)} | {k: 1.0 for k in range(31, 51)}
    p = _process({k: [1.05, *ROW[1:]] for k in range(20, 31)}, around)
    p.window = [20, 30]
    pace = pace_of(p, set(), alike=True)
    assert pace.before_ms == 1.6 and not pace.moved and pace.at_pace
    assert pace.step_ms == 1.0 and pace.cost == pytest.approx(0.05)


def test_a_kernel_profile_that_timed_no_kernel_says_what_it_gave() -> None:
    """A sixteenth look (aot_eager): "profiling the kernel profile's steps ... took 9.95 ms"
    and no kernels section after it. Where it timed none, the line says so and what it
    gave; where it timed kernels, nothing more."""
    from compilediag.render.views import window_notes
    from compilediag.report.model import KernelTiming, Timings

    r = Runtime(window=[10, 25], window_steps=16, window_step_ms=7.5, unprofiled_step_ms=8.0,
                kernel_step_ms=9.95, kernel_steps=[26, 30])  # fmt: skip
    (none,) = [t for label, t in window_notes(r, Timings()) if label == "profiling"]
    assert none.endswith("no generated or library kernel ran in them (the backend generates "
                         "none): it named the eager ops of the rest"), none  # fmt: skip
    timed = Timings(kernels=[KernelTiming("cpp_fused_relu_0", "generated", 5, 0.4, 0.1)])
    (some,) = [t for label, t in window_notes(r, timed) if label == "profiling"]
    assert "no generated" not in some and some.endswith("set against its own steps"), some


# look 26: pytorch/examples' DCGAN on an H200 (torch 2.11), the job's own clock at its first
# optimizer's step, steps 41-70 (those that held its checkpoint and sample images left out):
# its 2 loader workers fell behind in each epoch's second half
DCGAN_AROUND = [
    18.3, 17.71, 17.91, 17.37, 17.87, 16.58, 16.08, 16.48, 16.66, 18.49, 14.57, 18.31, 16.19,
    50.82, 15.73, 53.36, 15.45, 49.94, 16.01, 47.72, 16.51, 21.27, 20.4, 18.29, 18.16, 20.57,
]  # fmt: skip


def test_steps_around_the_window_well_over_their_median_are_said() -> None:
    """The pace read "the job's own 18.2 ms" where the job's steps took 22.6 ms on average by
    its own clock: a quarter of them waited 3x as long for their batch. The median stays the
    step the figures are set on (most steps run so); the mean and those steps are said."""
    numbers = [n for n in range(41, 71) if n not in (49, 50, 65, 66)]
    p = _process(
        {k: [21.4, 5.0, 5.3, 1.4, 1.3, 5.1, 0.0] for k in range(30, 41)},
        dict(zip(numbers, DCGAN_AROUND, strict=True)),
    )
    pace = pace_of(p, set(), alike=True)
    assert pace.around_ms == pytest.approx(statistics.median(DCGAN_AROUND))
    assert pace.around_mean_ms == pytest.approx(statistics.fmean(DCGAN_AROUND))
    assert pace.around_slow == 4 and pace.at_pace
    r = Runtime(window=[30, 40], window_step_ms=pace.window_ms, at_pace=True,
                window_cost=pace.cost, unprofiled_step_ms=pace.around_ms,
                unprofiled_steps=pace.around, unprofiled_mean_ms=pace.around_mean_ms,
                unprofiled_slow=pace.around_slow)  # fmt: skip
    assert pace_line(r) == (
        "pace: the window 21.4 ms a step, 1.20x the job's own 17.9 ms (26 steps around it, no "
        "instrument on; their mean 22.6 ms: 4 of them took over 2x the median, a cost the "
        "figures below leave out); the figures below are set on the job's pace"
    )
