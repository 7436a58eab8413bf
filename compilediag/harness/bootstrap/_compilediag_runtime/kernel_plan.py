"""When the kernel profile runs: over the steps after the window. An evaluation, a
checkpoint or a compile that comes into its steps drops it, and it starts again at the next
training step, MAX_RESTARTS times at most (none for now: see there); past them its rows leave
that work out, as kernel_window.py's evaluation ranges do, and the steps it held are named."""

from __future__ import annotations

from .kernel_window import _KernelWindow
from .progress import say as _say
from .torch_state import _frames_compiled

# kernel profiles dropped for other work in their steps, at most: none for now. Stopping
# torch.profiler and starting another in one process crashed a Lightning job under load
# (SIGSEGV, 3 runs in 5, torch 2.13 CPU); until that is understood, a profile that holds
# other work leaves its events out of its rows and names the steps it held
MAX_RESTARTS = 0


class KernelPlan:
    def __init__(self) -> None:
        self.kernels: _KernelWindow | None = None  # torch.profiler after the window
        self.restarts = 0  # profiles dropped for an evaluation, a checkpoint, a compile
        self._wanted = 0  # steps a profile is to start on, at the next training step
        self._compiles = 0  # torch's frame count when the profile started
        self._cuda = False

    def start(self, cuda: bool, steps: int, step: int) -> None:
        self._cuda = cuda
        self.kernels = _KernelWindow(cuda, steps)
        self._compiles = _frames_compiled()
        self.kernels.step(step)

    def step(self, step: int, other_work: bool) -> bool:
        """Step `step` starts (`other_work`: an evaluation is under way): True where the
        profile took it (it steps on, or starts again where one was dropped); where its
        steps are over it stops. A step torch compiled in drops it and starts it anew."""
        kernels = self.kernels
        if self._wanted and not other_work:
            steps, self._wanted = self._wanted, 0
            self.start(self._cuda, steps, step)
            return True
        if kernels is None or kernels.steps_left is None:
            return False
        if kernels.steps_left == 0:  # its steps are over
            kernels.stop()
            _say("kernel profile done; the job goes on as it is")
            return False
        if _frames_compiled() != self._compiles and self.drop("a compile"):
            steps, self._wanted = self._wanted, 0
            self.start(self._cuda, steps, step)
            return True
        kernels.step(step)
        return True

    def drop(self, what: str) -> bool:
        """Other work (`what`) came into the profile's steps: it is dropped, to start again
        at the next training step (True), unless it is not running or was dropped
        MAX_RESTARTS times."""
        kernels = self.kernels
        if kernels is None or kernels.steps_left is None or self.restarts >= MAX_RESTARTS:
            return False
        self.restarts += 1
        self._wanted = kernels.wanted
        kernels.discard()
        self.kernels = None
        _say(f"kernel profile moved past {what}")
        return True

    def other_work(self, starts: bool, what: str) -> None:
        """An evaluation or a checkpoint starts or ends: the profile moves past it, or
        leaves it out of its rows."""
        if self.kernels is not None and not (starts and self.drop(what)):
            self.kernels.evaluation(starts)
