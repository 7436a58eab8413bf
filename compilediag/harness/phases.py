"""What compilediag's own run of a model took, phase by phase (#74: a user who times
`explain` against their own compile and timing loop can see where the rest went). The
worker's phases are read off the stages it announces (Worker.stage): each lasts from its
stage to the next one that starts another phase; a stage a phase announces inside itself
(the numerics search's, the serving replay's) stays in that phase. The timing's progress
lines (Worker.progress) mark its parts too: its rounds, the GPU's time, the profiler."""

from __future__ import annotations

import time

# a worker stage's opening words -> its phase; "done" ends the last one
PHASES = (
    ("importing torch", "torch import"),
    ("loading the model", "model load"),
    ("setting up torch.compile", "torch.compile set-up"),
    ("running eager", "eager calls"),
    ("compiling and running", "compile and first calls"),
    ("the compile failed", "custom op checks"),
    ("replaying", "serving replay"),
    ("timing: the GPU's own time", "timing: the GPU's own time"),
    ("timing: profiling", "timing: the profiler's pass"),
    ("timing eager vs compiled", "timing"),
    ("cross-checking", "cross-check"),
    ("comparing outputs", "numerics check"),
    ("done", ""),
)
AGAIN = "(the blocks spread)"


class PhaseClock:
    """Seconds by phase, from the stages announced (`mark`), by the monotonic clock."""

    def __init__(self) -> None:
        self._phase, self._since = "", 0.0
        self.seconds: dict[str, float] = {}

    def mark(self, stage: str) -> None:
        phase = next((p for words, p in PHASES if stage.startswith(words)), None)
        if phase == "timing" and AGAIN in stage:  # measure._rounds' words for a round past 1
            phase = "timing: rounds again (the blocks spread)"
        if phase is None:  # a stage inside the phase under way
            return
        now = time.monotonic()
        if self._phase:
            self.seconds[self._phase] = self.seconds.get(self._phase, 0.0) + now - self._since
        self._phase, self._since = phase, now

    def rounded(self) -> dict[str, float]:
        return {p: round(s, 3) for p, s in self.seconds.items()}
