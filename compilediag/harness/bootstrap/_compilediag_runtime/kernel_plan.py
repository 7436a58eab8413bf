"""When the kernel profile runs: over the steps after the window. A step that holds an
evaluation, a checkpoint or a compile is left out of its rows, and in a process alone the
profile runs a training step more in its place (kernel_window.hold; ranks profile the
same steps); the steps it held are named."""

from __future__ import annotations

from .kernel_window import _KernelWindow
from .torch_state import _frames_compiled
from .torch_state import say as _say


class KernelPlan:
    def __init__(self) -> None:
        self.kernels: _KernelWindow | None = None  # torch.profiler after the window
        self._compiles = 0  # torch's frame count at the step under way's start

    def start(self, cuda: bool, steps: int, step: int) -> None:
        self.kernels = _KernelWindow(cuda, steps)
        self._compiles = _frames_compiled()
        self.kernels.step(step)

    def step(self, step: int, other_work: bool) -> bool:
        """Step `step` starts (`other_work`: an evaluation is under way, so the step holds
        it too): True where the profile took it; where its steps are over it stops. The
        step before, where torch compiled in it, is held."""
        kernels = self.kernels
        if kernels is None or kernels.steps_left is None:
            return False
        compiles = _frames_compiled()
        if compiles != self._compiles:
            self._compiles = compiles
            kernels.hold()
        if kernels.steps_left == 0:  # its steps are over
            kernels.stop()
            held = f" (left out: {_numbers(kernels.held)}, other work)" if kernels.held else ""
            _say(f"kernel profile done{held}; the job goes on as it is")
            return False
        kernels.step(step)
        if other_work:
            kernels.hold()
        return True

    def other_work(self, starts: bool) -> None:
        """An evaluation or a checkpoint starts (or ends): the step under way is held."""
        if starts and self.kernels is not None:
            self.kernels.hold()


def _numbers(steps: list[int]) -> str:
    return ("steps " if len(steps) > 1 else "step ") + ", ".join(map(str, steps))
