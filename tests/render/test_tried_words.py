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
        "the job as it is, run 4 times more alternated with the remedies: 43.7 ms a step "
        "by their windows (within 6% of each other)"
    )


def test_a_spread_wider_than_half_a_step_is_said_in_steps_not_as_a_share() -> None:
    """An eleventh look read "1.36 ms a step by their windows (within 3045% of each other)"
    on a busy machine: a spread past ±50% is said in median steps."""
    wide = try_baseline_words(TryBaseline(step_ms=1.36, runs=4, spread=30.45))
    assert wide.endswith("(the slowest and the fastest 30.4× the median step apart)"), wide
    assert "%" not in wide
