"""The optimizer's part of a step is marked where the job calls `opt.step()`: torch's own
wrapper around the step (its profiler range) included, with an LR scheduler's wrapper on the
optimizer too. A fifteenth look's AdamW under StepLR read 0.34 ms where the job's own clock
around `opt.step()` read 0.45 ms: the scheduler's wrapper, made before the first step, calls
the class's step it found then, so only torch's hooks marked it, inside the range."""

from __future__ import annotations

import time
from typing import Any

import pytest

from compilediag.harness.bootstrap._compilediag_runtime.step_hooks import _watch_optimizer_steps

torch = pytest.importorskip("torch")

SLOW_S = 0.004  # what torch's wrapper is made to cost around the step, outside its hooks


class Marks:
    """The probe's side of an optimizer step: where each starts and ends."""

    def __init__(self) -> None:
        self.spans: list[float] = []
        self.optimizer_runs = 0
        self._start = 0.0

    def optimizer_enter(self) -> None:
        self._start = time.perf_counter()

    def optimizer_exit(self, optimizer: Any) -> None:
        self.spans.append(time.perf_counter() - self._start)
        self.optimizer_runs += 1

    def optimizer_skipped(self, optimizer: Any) -> None:
        raise AssertionError("no GradScaler here")


@pytest.mark.parametrize("scheduled", [False, True])
def test_an_optimizer_step_is_marked_around_torchs_wrapper(
    monkeypatch: pytest.MonkeyPatch, scheduled: bool
) -> None:
    from torch.autograd import profiler

    entered = profiler.record_function.__enter__

    def slow_enter(self: Any) -> Any:  # torch's range around the hooks, made slow
        time.sleep(SLOW_S)
        return entered(self)

    model = torch.nn.Linear(4, 4)
    opt = torch.optim.AdamW(model.parameters())
    if scheduled:  # made before the first step, as a training script does
        torch.optim.lr_scheduler.StepLR(opt, step_size=10)
    scheduler_step = vars(opt).get("step")
    marks = Marks()
    undo = _watch_optimizer_steps(marks, lambda: False)  # type: ignore[arg-type]
    monkeypatch.setattr(profiler.record_function, "__enter__", slow_enter)
    own: list[float] = []
    try:
        for _ in range(4):
            model(torch.randn(2, 4)).sum().backward()
            start = time.perf_counter()
            opt.step()
            own.append(time.perf_counter() - start)
            opt.zero_grad()
    finally:
        for u in undo:
            u()
    assert marks.optimizer_runs == 4  # each step once, never twice
    # the first step is marked by torch's hooks (inside the range); from the second on, the
    # whole of the job's `opt.step()` but the marks' own cost
    for mark, theirs in list(zip(marks.spans, own, strict=True))[1:]:
        assert mark >= SLOW_S and mark <= theirs, (marks.spans, own)
    assert vars(opt).get("step") is scheduler_step  # put back
    assert not getattr(torch.optim.AdamW.step, "_compilediag_marked", False)
