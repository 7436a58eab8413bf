"""What `compilediag fix` found, as data the renderers read: each break with its kept
patch and the measurements that verified it, or why there is none; the run's recompiles,
none patched, each with why."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Evidence:
    """A kept patch, measured: torch's counts, outputs against the original's, time."""

    gb_id: str
    graphs: tuple[int, int]  # before, after
    graph_breaks: tuple[int, int]
    recompiles: tuple[int, int]
    eager_err: float  # max abs error against the original's eager outputs
    compiled_err: float  # the same, compiled
    compiled_ms: tuple[float | None, float | None]  # the compiled call, median
    grad_err: float | None = None  # --train: the parameters' gradients, eager and compiled
    # what the counts were measured on: the kept patches below it already applied (`fix`
    # patches from the last line up); [] the original file
    after_lines: list[int] = field(default_factory=list)

    def text(self) -> str:
        g0, g1 = self.graphs
        err = max(self.eager_err, self.compiled_err, self.grad_err or 0.0)
        equal = "outputs" if self.grad_err is None else "outputs and gradients"
        base = (
            f" (measured after the patch{'es' * (len(self.after_lines) > 1)} at line"
            f"{'s' * (len(self.after_lines) > 1)} {', '.join(map(str, self.after_lines))})"
            if self.after_lines
            else ""
        )
        graphs = (
            f"{g0} graph{'s' * (g0 != 1)} → {g1}{base}" if g0 != g1
            # (a look read "0 graphs → 0": another break kept the frame uncompiled either way)
            else f"still {g0} graph{'s' * (g0 != 1)}{base}" if g0
            else f"still no graph{base}: another break keeps the frame from compiling"
        )  # fmt: skip
        parts = [
            f"{self.gb_id or 'the break'} gone",
            graphs,
            f"{equal} equal (max abs err {err:.3g})",
        ]
        before, after = self.compiled_ms
        if before is not None and after is not None:
            # each figure is its own process's, one run each: two runs of one model differ
            # by up to RUN_TO_RUN on a quiet machine (`diff`'s tolerance) and by up to 1.7x
            # on a busy one (a look: a patch read 1.9x slower, and was faster in-process), so
            # a change past it is one pair of runs, no verdict (--try-fixes runs pairs)
            moved = max(after, before) > min(after, before) * (1 + RUN_TO_RUN)
            pair = " (one run each: undecided)" if moved else ""
            parts.append(f"compiled call {_ms(before)} → {_ms(after)} ms{pair}")
        return "; ".join(parts)


RUN_TO_RUN = 0.2


def _ms(value: float) -> str:
    return f"{value:.3g}" if value < 10 else f"{value:.0f}"


@dataclass
class BreakFix:
    """One graph break and what `fix` did about it."""

    file: str
    line: int
    code: str
    cause: str
    gb_id: str
    reason: str
    patched: bool = False
    what: str = ""  # the edit, in words
    diff: str = ""  # the kept patch, as a unified diff
    evidence: Evidence | None = None
    why: str = ""  # why there is no patch
    advice: str = ""  # today's advice for it


@dataclass
class FixResult:
    file: str  # the target, as shown
    sha256: str  # the file's content when the run began
    breaks: list[BreakFix]
    diff: str = ""  # every kept patch, together
    applied: str = ""  # --apply: where the original was kept
    torch: str = ""  # the torch that ran it
    setup: str = ""  # device · backend/mode, as explain's header
    # the recompiles of the run: none is patched (no rewrite is known that keeps what the
    # code does), each with why and today's advice
    recompiles: list[RecompileFix] = field(default_factory=list)
    text: str = ""  # the file with every kept patch (not in the JSON: `diff` says it)


@dataclass
class RecompileFix:
    """A recompile of the run, and why `fix` made no patch for it."""

    file: str  # where the guard was installed (the frame's, where that is not known)
    line: int
    code: str
    cause: str  # compilediag's: shape, length, int, ...
    guard: str  # the failed guard, in words
    count: int  # recompiles of this guard
    why: str
    advice: str
