"""The loop's lines by the job's own clock, a step held by the machine left out (look 24:
on a loaded machine `opt.zero_grad()` read 1 ms a step, a third of the step, from 3 of 9
steps of 6 ms among steps of 1.7; the job's own clock gave it 0.04-0.1 ms)."""

from __future__ import annotations

from pathlib import Path

import pytest

from compilediag.analysis.step.waits import line_stalls, line_steps, loop_lines, loop_step_ms
from compilediag.harness.worker_types import ProcessRuntime, WindowLine
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
