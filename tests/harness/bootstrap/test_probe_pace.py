"""The steps the probe times outside its window (the job's pace, #74) are steps of the
job's own kind: one GradScaler skipped (inf gradients: no optimizer step) is not among them.
On an H200 a float16 job's skipped first steps ran a third faster than its others, and its
report's step, set on them, read 1.5-2.1 ms where the job's own clock gave 2.9-4.3
(tests/analysis/step/test_step_parts.py's CUDA test, which checks it end to end)."""

from __future__ import annotations

from types import SimpleNamespace

from compilediag.harness.bootstrap._compilediag_runtime.probe import Probe


def test_a_step_gradscaler_skipped_is_not_taken_for_the_jobs_pace() -> None:
    probe = Probe((30, 32), kernels=False)
    optimizer = SimpleNamespace(defaults={})
    skipped = {3, 4, 5, 36, 37}
    for n in range(1, 45):
        if n in skipped:  # GradScaler's step found inf gradients: the probe is told so
            probe.optimizer_skipped(optimizer)
        else:
            probe.optimizer_enter()
            probe.optimizer_exit(optimizer)
    assert probe.skipped_steps == len(skipped) and probe.step_numbers == [30, 31, 32]
    assert not skipped & set(probe.plain_steps)
    # the others near the window are all there (but step 1, which ended before the steps
    # were known to be the optimizer's; 29, which learnt the loop's lines; the window; and
    # 33, which began where the window was read)
    assert set(probe.plain_steps) == set(range(2, 45)) - skipped - {29, 30, 31, 32, 33}
    assert len(probe.plain_step_s) == len(probe.plain_steps)
