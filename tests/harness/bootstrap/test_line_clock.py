"""The loop's line clock before Python 3.12 (MarkClock): which line an interval between two
reads goes to. The loop is learnt from the step before the window, which starts where the
step before it ended (at the optimizer's end, the loop's last torch line): the lines the
loop runs from there round to the model's call are the slow batch's (#74: before, the path
was not read round and the function's own order was taken, with `os.environ.get` -
Python's own, a frozen module's - counted as a call of the user's)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from compilediag.harness.bootstrap._compilediag_runtime.line_clock import MarkClock
from compilediag.harness.bootstrap._compilediag_runtime.torch_state import own_dirs


def make_batch() -> list[int]:
    return [1, 2]


class _Opt:
    def step(self) -> None:
        pass


def _model(batch: list[int]) -> int:
    return sum(batch)


def _done(frame: object) -> object:
    return frame


# a function of a frozen module of Python's own (as `os.environ.get` is, Mapping.get from
# <frozen _collections_abc>)
_space: dict = {}
exec(compile("def frozen_get(key):\n    return None\n", "<frozen _fake>", "exec"), _space)
frozen_get = _space["frozen_get"]


def _loop() -> object:
    opt, frame = _Opt(), None
    for _ in range(2):
        # STEPS: the next line calls Python's own module (a compound statement's head, read
        # as the clock reads it: no comment after it)
        if frozen_get("JOB_STEPS"):
            continue
        batch = make_batch()  # BATCH
        frame = frame or sys._getframe()
        loss = _model(batch)  # MODEL
        opt.step()  # OPT
        del loss
    return _done(frame)  # DONE: after the loop, a function of the user's


def _line(marker: str) -> int:
    text = Path(__file__).read_text().splitlines()
    return next(i for i, line in enumerate(text, 1) if line.endswith(f"# {marker}") or
                f"# {marker}:" in line)  # fmt: skip


def test_an_interval_from_the_optimizer_round_to_the_model_goes_to_the_batch_line() -> None:
    frame = _loop()
    clock = MarkClock(frame, own_dirs())
    steps, batch, model, opt = (_line(m) for m in ("STEPS", "BATCH", "MODEL", "OPT"))
    steps += 2
    # a line that calls Python's own module is not the user's call; the line after the
    # loop is
    assert steps not in clock._calls and batch in clock._calls
    assert _line("DONE") in clock._calls
    # the step before the window, learnt from its start at the optimizer's end: round the
    # loop to its model's call
    clock._path = [opt + 1, steps, steps + 1, batch, batch + 1, model, opt]  # fmt: skip
    clock.torch_lines = {(clock.loop, opt), (clock.loop, model)}
    assert clock._between(opt, model) == [(batch, 1.0)]
    # read the other way (no wrap needed), the interval from the batch to the model is the
    # batch's too
    assert clock._between(batch, model) == [(batch, 1.0)]


def test_several_calling_lines_share_an_interval_as_they_shared_the_step_before() -> None:
    """A loop that calls a clock of its own around its batch (`t0 = clock()`; `x =
    make_batch()`; `t1 = clock()`): the interval from the optimizer round to the model goes
    to those lines as the step before the window spent its time in them (#74: before, to
    the optimizer's line, as no one line called a function)."""
    frame = _loop()
    clock = MarkClock(frame, own_dirs())
    steps, batch, model, opt = (_line(m) for m in ("STEPS", "BATCH", "MODEL", "OPT"))
    steps += 2
    clock._path = [opt + 1, steps, steps + 1, batch, batch + 1, model, opt]  # fmt: skip
    clock._calls[steps + 1] = "clock"  # a second line that calls a function of the user's
    clock._took = {steps + 1: 0.0001, batch: 0.0079, model: 0.001}
    clock.torch_lines = {(clock.loop, opt), (clock.loop, model)}
    shares = dict(clock._between(opt, model))
    assert set(shares) == {steps + 1, batch} and shares[batch] == pytest.approx(0.0079 / 0.008)


def test_round_the_loop_means_the_loops_own_lines() -> None:
    """#74 (4): where the step before the window was not learnt, an interval from the
    optimizer's line to the model's call goes round the loop: the lines of the `for`, never
    the set-up before it (FSDP2's `fully_shard(...)` call there took the slow rank's batch
    time away from get_batch)."""
    from compilediag.harness.bootstrap._compilediag_runtime.line_clock import _loop_lines

    seen = []

    def setup() -> None:
        pass

    def job() -> None:
        setup()  # a call of the user's before the loop
        total = 0
        for i in range(2):
            total += i
            seen.append((sys._getframe().f_code.co_firstlineno, _loop_lines(sys._getframe())))
        return None

    job()
    first, lines = seen[0]  # (read inside the loop, as the clock reads the live loop frame)
    assert first + 1 not in lines and first + 2 not in lines  # setup(), total = 0
    assert lines == [first + 3, first + 4, first + 5]  # the for and its body


def test_lines_that_call_none_of_the_users_share_an_interval_as_the_step_before() -> None:
    """From the model's call to backward's start the loop runs its loss and zero_grad lines
    (torch's functions: no call of the user's): the interval goes to them as the step
    before the window spent its time there, not to the model's line (a ninth look: the
    model's line read 1.003 ms against the job's 0.544, a loss line of 0.408 ms unlisted)."""
    frame = _loop()
    clock = MarkClock(frame, own_dirs())
    model, opt = _line("MODEL"), _line("OPT")
    loss, zero = model + 101, model + 102  # lines of no call of the user's
    clock._path = [model, loss, zero, opt]
    clock.torch_lines = {(clock.loop, opt), (clock.loop, model)}
    clock._took = {model: 0.0005, loss: 0.0004, zero: 0.0001}
    shares = dict(clock._between(model, opt))
    assert set(shares) == {loss, zero}, shares
    assert shares[loss] == pytest.approx(0.8) and shares[zero] == pytest.approx(0.2)
    # nothing run between, or nothing timed there: the line the interval began on
    clock._took = {}
    assert clock._between(model, opt) == [(model, 1.0)]
