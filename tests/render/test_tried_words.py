"""`run --try-fixes`' baseline in words (#76): a spread is said only where there are runs
to spread (a sixth look read "run once more ... (within 0% of each other)")."""

from __future__ import annotations

from compilediag.render.tried import try_baseline_words
from compilediag.report.model import TryBaseline


def test_one_baseline_run_has_no_spread_to_give() -> None:
    one = try_baseline_words(TryBaseline(step_ms=43.7, runs=1, spread=0.0))
    assert one == (
        "the job as it is, run once more alternated with the remedies: 43.7 ms a step by its window"
    )
    four = try_baseline_words(TryBaseline(step_ms=43.7, runs=4, spread=0.06))
    assert four == (
        "the job as it is, run 4 times more alternated with the remedies: 43.7 ms a step, "
        "their windows' geometric mean (within 6% of each other); each remedy is set against "
        "the runs of its own rounds"
    )


def test_a_spread_wider_than_half_a_step_is_said_in_steps_not_as_a_share() -> None:
    """An eleventh look read "1.36 ms a step by their windows (within 3045% of each other)"
    on a busy machine: a spread past ±50% is said in median steps."""
    wide = try_baseline_words(TryBaseline(step_ms=1.36, runs=4, spread=30.45))
    assert "the slowest run's step less the fastest's: 30× the median run's)" in wide, wide
    assert "%" not in wide


def test_a_step_shortened_past_its_parts_whole_time_is_remarked() -> None:
    """An eleventh look: "(it can shorten the optimizer: at most 23% of the step): the step
    1.9 ms → 1.34 ms" (30% shorter) with no remark. A step shortened by more than the
    remedy's part took in all is said to hold the runs' spread too."""
    from compilediag.render.tried import tried_words
    from compilediag.report.model import Tried

    t = Tried("foreach", "AdamW(..., foreach=True)", part="optimizer")
    t.step_ms, t.step_ms_after, t.part_ms, t.part_ms_after = 1.9, 1.34, 0.44, 0.3
    t.why = "undecided: 1.42× faster (no interval) on one pair of runs"
    said = tried_words(t)
    assert "the step 1.9 ms → 1.34 ms (more than the optimizer's whole 0.440 ms" in said, said
    t.step_ms_after = 1.7
    assert "more than" not in tried_words(t)


def test_nothing_to_try_says_the_figures_it_chose_on() -> None:
    """A re-check read "nothing to try (... the optimizer ...)" beside "optimizer 3.76 ms of
    22.2 ms" (17%, the step's mean, raised by slow steps): the words give the median step's
    shares that candidates() decides on."""
    from compilediag.analysis.step.remedies import candidates
    from compilediag.cli.commands.again.try_fixes import nothing_words
    from compilediag.report.model import Runtime
    from tests.render.test_render import fixed_report

    report = fixed_report()
    report.graph_breaks = []
    report.runtime = Runtime(optimizer="AdamW", step_medians={"step": 22.2, "optimizer": 0.53})
    assert candidates(report) == []
    said = nothing_words(report)
    assert said.startswith("in the window's median step the optimizer holds 2% and the data "
                           "loader 0%, a remedy runs for 10% or more; "), said  # fmt: skip
