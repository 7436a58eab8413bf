"""The loop's lines by the job's own clock, a step held by the machine left out (look 24:
on a loaded machine `opt.zero_grad()` read 1 ms a step, a third of the step, from 3 of 9
steps of 6 ms among steps of 1.7; the job's own clock gave it 0.04-0.1 ms)."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest

from compilediag.analysis.step.waits import line_stalls, line_steps, loop_lines, loop_step_ms
from compilediag.harness.worker_types import ProcessRuntime, Profiled, WindowLine
from compilediag.render.window_words import loop_lines_words
from compilediag.report.model import Runtime

LOOP = """\
for x, y in loader:
    loss = nn.functional.cross_entropy(cmodel(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""
STEPS = [10, 11, 12, 13, 14, 16, 17, 19, 20]
HELD = {11: 4.1, 13: 4.4, 20: 6.2}  # the machine held these steps at zero_grad's line


def _process(train: Path, usual: dict[int, float]) -> ProcessRuntime:
    def line(n: int, each: float, torch: bool = True) -> WindowLine:
        return WindowLine(str(train), n, "main", True, torch, {str(k): each for k in STEPS})

    zero = line(3, 0.0)
    zero.ms = {str(k): HELD.get(k, usual.get(k, 0.05)) for k in STEPS}
    lines = [line(1, 0.7), line(2, 0.5), zero, line(4, 0.3), line(5, 0.4)]
    return ProcessRuntime(pid=1, rank=None, argv=[], window=[10, 20], window_lines=lines)


def test_a_step_the_machine_held_is_left_out_of_the_loops_lines(tmp_path: Path) -> None:
    train = tmp_path / "train.py"
    train.write_text(LOOP)
    p = _process(train, {})
    left_out = {15, 18}  # the window's own stalls
    assert line_steps(p, left_out) == STEPS
    held = line_stalls(p, left_out)
    assert held == sorted(HELD)
    timed = left_out | set(held)
    lines = loop_lines(p, timed)
    assert lines[0].line == 1 and lines[0].ms == pytest.approx(0.7)
    (zero,) = [x for x in lines if x.line == 3]
    assert zero.ms == pytest.approx(0.05)
    assert loop_step_ms(p, timed) == pytest.approx(1.95)
    r = Runtime(loop=lines, loop_steps=line_steps(p, timed), loop_stalled=held)
    words = loop_lines_words(r)
    assert words.startswith(
        "a step's costliest, by the job's own clock at each line over steps 10, 12, 14, 16, "
        "17, 19 (steps 11, 13, 20 left out: the loop's lines took over 3x their "
        "median there, a pause): "
    ), words
    assert "train.py:1 `for x, y in loader:` 0.700 ms · :2" in words and "zero_grad" not in words
    # without the held steps left out, zero_grad read 1.67 ms a step (the look: 1 ms)
    assert [x.ms for x in loop_lines(p, left_out) if x.line == 3] == [pytest.approx(1.67, abs=0.01)]


def test_a_line_that_works_every_other_step_is_not_a_pause(tmp_path: Path) -> None:
    """Half the steps do more at one line (a log written every other step): the steps
    differ, none is held, every one counts."""
    train = tmp_path / "train.py"
    train.write_text(LOOP)
    p = _process(train, {k: 6.0 for k in STEPS[::2]})
    p.window_lines[2].ms = {str(k): 6.0 if i % 2 == 0 else 0.05 for i, k in enumerate(STEPS)}
    assert line_stalls(p, set()) == []


GAN_LOOP = """\
for i, (real,) in enumerate(loader):
    errD = train_discriminator(real)
    optD.step()
    errG = train_generator()
    optG.step()
    if i == 0:
        save_samples(netG(fixed), path)
"""


def _gan(train: Path, at: int) -> ProcessRuntime:
    """A GAN's window (steps 30-40) by the loop's line clock and its parts: each line's usual
    time, and at step 34 the loop's line `at` took 140 ms more (a DCGAN's sample images at
    line 7, in the rest of the step; the data loader's next batch at line 1, its part)."""
    steps = [30, 31, 32, 34, 35, 36, 37, 38, 39, 40]
    usual = {1: 2.4, 2: 5.0, 3: 1.1, 4: 6.0, 5: 1.0, 6: 0.01, 7: 0.0}

    def line(n: int) -> WindowLine:
        ms = {str(k): usual[n] + (140.0 if (k, n) == (34, at) else 0.0) for k in steps}
        return WindowLine(str(train), n, "<module>", True, n not in (6, 7), ms)

    lines = [line(n) for n in usual]
    part = 5 if at == 7 else 4  # the rest of the step, or the data loader's part
    rows = [[15.5, 5.0, 6.0, 2.1, 2.4, 0.0, 0.0] for _ in steps]
    rows[steps.index(34)][0] += 140.0
    rows[steps.index(34)][part] += 140.0
    prof = Profiled(len(steps), 15.5, 0.0, per_step=rows, step_numbers=steps)
    return ProcessRuntime(
        pid=1, rank=None, argv=[], window=[30, 40], window_lines=lines, profiled=prof
    )


def test_a_stalled_steps_time_at_a_line_of_the_jobs_own_is_said_there(tmp_path: Path) -> None:
    """Look 26 (pytorch/examples' DCGAN on an H200): the job saves sample images at each
    epoch's first step; that step took 165 ms among steps of 21 and read "a pause (a
    library's lazy start, the machine)", as though the machine held it. The loop's line
    clock has its time at the job's own line: said there. A step whose time went to the
    data loader's line (torch's part: a batch the workers had not made) stays a pause."""
    from compilediag.analysis.step.waits import stalled_at
    from compilediag.render.window_words import stalled_words

    train = tmp_path / "train.py"
    train.write_text(GAN_LOOP)
    p = _gan(train, at=7)
    (held,) = stalled_at(p, {34}, {34})["34"]
    assert (held.line, held.ms, held.calls) == (7, pytest.approx(140.0), "save_samples")
    r = Runtime(window=[30, 40], window_steps=10, window_step_ms=15.5,
                window_stalled={"34": 155.5}, window_stalled_at=stalled_at(p, {34}, {34}))  # fmt: skip
    said = stalled_words(r)
    assert said.startswith(
        f"step 34 took 156 ms, 10x the window's median step (15.5 ms), at {train}:7 "
        "`save_samples(netG(fixed), path)` 140 ms; no compile and no evaluation in it"
    ), said
    assert said.endswith("the job's own work at that line, which its other steps do not do")
    assert "pause" not in said
    data = _gan(train, at=1)
    assert stalled_at(data, {34}, {34}) == {}
    r.window_stalled_at = {}
    assert stalled_words(r).endswith("a pause (a library's lazy start, the machine)")


def _timed_run(tmp_path: Path, job: str) -> tuple[dict, dict[int, dict], list[str]]:
    """`compilediag run` over steps 12-24 of a job in tests/fixtures/run_jobs that times its
    lines with its own clock: the report, the job's own figures by step, its lines."""
    import json

    from tests.conftest import ROOT, run_cli

    jobs = ROOT / "tests" / "fixtures" / "run_jobs"
    facts = tmp_path / "facts"
    proc = run_cli(
        "run", "--profile-steps", "12-24", "--format", "json", "--", sys.executable,
        str(jobs / job), env={"JOB_FACTS": str(facts), "PYTHONPATH": str(jobs)},
    )  # fmt: skip
    assert proc.returncode == 0 and proc.stdout.strip(), proc.stderr[-3000:]
    own = {r["n"]: r for r in map(json.loads, facts.read_text().splitlines())}
    return json.loads(proc.stdout), own, (jobs / job).read_text().splitlines()


def _window_steps(report: dict) -> list[int]:
    r = report["runtime"]
    a, b = r["window"]
    held = set(r["window_left_out"]) | set(r["window_compiled"]) | set(r["loop_stalled"])
    return [n for n in range(a, b + 1) if n not in held]


def test_a_batch_function_beside_a_hand_update_gets_its_own_time(tmp_path: Path) -> None:
    """Look 26 (pytorch/examples' regression, Python 3.11): the parameters updated by hand
    in a Python loop after backward, then `get_batch()`: "get_batch takes 21% of a step
    (0.204 ms)" where the job's own clock read 0.03: the update's time went to the one line
    between two marks that calls a function of the user's. Each line has its own time by
    the job's clock (the update's lines theirs), where the step before the window was
    learnt."""
    report, own, text = _timed_run(tmp_path, "hand_update.py")
    steps = _window_steps(report)
    batch = statistics.mean(own[n]["batch"] for n in steps)
    update = statistics.mean(own[n]["update"] for n in steps)
    assert update > 3 * batch, (batch, update)  # the update outweighs the batch
    rows = report["runtime"]["loop"]
    (got,) = [x for x in rows if x["calls"] == "get_batch"]
    assert got["ms"] == pytest.approx(batch, rel=0.5, abs=0.02), (got, batch, update)
    at = {i for i, t in enumerate(text, 1) if "p.data.add_" in t or "in model.parameters" in t}
    updated = sum(x["ms"] for x in rows if x["line"] in at)
    assert updated == pytest.approx(update, rel=0.5), (rows, update)


def test_a_model_lines_end_is_its_own_not_the_next_lines(tmp_path: Path) -> None:
    """Look 27 (pytorch/examples' word_language_model, an LSTM Dynamo runs eagerly after a
    break, Python 3.11): "`loss = criterion(output, targets)` 2.69 ms" where the job's own
    clock read 0.39: the model's line, after its call returned, freed the step before's
    autograd graph as it assigned the output, and that time went to the loss's line. The
    end of a line after its last mark is learnt with the lines in the step before the
    window, and the loss line keeps near its own time (its graph of 3000 eager ops freed at
    the model's line: 2-7 ms a step)."""
    report, own, text = _timed_run(tmp_path, "eager_tail.py")
    loss = statistics.mean(own[n]["loss_line"] for n in _window_steps(report))
    at = next(i for i, t in enumerate(text, 1) if "loss = nn.functional.mse_loss" in t)
    (got,) = [x for x in report["runtime"]["loop"] if x["line"] == at]
    assert loss / 3 <= got["ms"] <= 2.5 * loss + 0.2, (got, loss, report["runtime"]["loop"])
