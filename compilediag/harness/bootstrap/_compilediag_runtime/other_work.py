"""Work a training job does between its steps that is not a training step: an evaluation
(calls of the compiled model under no_grad or inference_mode, or with the module in eval
mode, in a job that steps an optimizer), a checkpoint (torch.save outside compiled code),
each named by the function that runs it."""

from __future__ import annotations

import time
from typing import Any

from .torch_state import _frames_compiled, job_frames

MAX_KEPT = 1000  # occurrences kept (an evaluation every few steps of a long job: the first)
# words that name an evaluation function, preferred among the frames only it has
EVAL_WORDS = ("eval", "valid", "estimate", "test", "predict")


class OtherWork:
    def __init__(self) -> None:
        self.training_code: set[Any] | None = None  # the code on a training call's stack
        self.occurrences: list[dict[str, Any]] = []  # one per step and kind of work
        self.calls: dict[str, int] = {}  # graph calls made by evaluation calls, by compile id
        self._open: list[str] = []  # the kinds of the calls of other work under way
        self._trained: int | None = None  # the step of the last training call
        self.first_trained: int | None = None  # ... and of the first
        self.signalled = False  # the job was stopped by a signal (writer.py)

    @property
    def evaluating(self) -> bool:
        return "evaluation" in self._open

    @property
    def trained(self) -> bool:
        return self._trained is not None

    def training_call(self, step: int) -> None:
        self._trained = step
        if self.first_trained is None:
            self.first_trained = step
        if self.training_code is None:
            self.training_code = {code for code, _ in _stack()}

    def work_call(self, kind: str, step: int, call: bool = True) -> None:
        """A call of other work (`kind`: an evaluation's call of the compiled model, a
        checkpoint's torch.save) starts in `step`; not a `call`: the model put in eval mode
        (an evaluation that may never call the compiled model)."""
        self._open.append(kind)
        now = time.perf_counter()
        last = self.occurrences[-1] if self.occurrences else None
        if last is not None and last["step"] == step and last["kind"] == kind:
            if call and not last["calls"]:  # named by its first call of the compiled model
                last["stack"] = _stack()
            last["calls"] += call
        elif len(self.occurrences) < MAX_KEPT:
            self.occurrences.append(
                {"kind": kind, "step": step, "calls": int(call), "start": now, "end": now,
                 "stack": _stack(), "frames": _frames_compiled(), "compiled": False,
                 "before": self._trained != step}
            )  # fmt: skip

    def work_ended(self) -> None:
        if self._open:
            self._open.pop()
        if self.occurrences:
            last = self.occurrences[-1]
            last["end"] = time.perf_counter()
            last["compiled"] = last["compiled"] or _frames_compiled() != last["frames"]

    def graph_call(self, cid: str) -> None:
        if self.evaluating:
            self.calls[cid] = self.calls.get(cid, 0) + 1

    def renumber_first_steps(self) -> None:
        """The steps turn out to be an optimizer's, and its first step has just ended: what
        happened before was step 1 (as one occurrence)."""
        merged: dict[str, dict[str, Any]] = {}
        for o in self.occurrences:
            first = merged.setdefault(o["kind"], o)
            if first is not o:
                first["calls"] += o["calls"]
                first["end"] = o["end"]
                first["compiled"] = first["compiled"] or o["compiled"]
            first["step"] = 1
        self.occurrences[:] = list(merged.values())

    def steps(self) -> set[int]:
        return {o["step"] for o in self.occurrences}

    def facts(self, since: int = 0, in_call: bool = False) -> list[dict[str, Any]]:
        """Each occurrence, named: its function (the outermost frame of its stack that no
        training call has, one whose name says evaluation where there is one; a checkpoint's:
        the function that saved it), the function's file and line (a checkpoint's: the
        torch.save line), its calls, its host time from its first call's start to
        its last call's end (ms), and whether torch compiled during it; one still under way
        (the job stopped in it: a signal, or `in_call`, a call of the model under way) is
        `unfinished`, its time so far; one still open at the job's own end (eval() never
        undone: a look's siamese network, "under way when the job stopped" for a test() that
        ran to its end) ran to its last call. Those from step `since` on (a job stepped at
        its model's calls: its evaluation calls before it first trained were its steps)."""
        out = []
        now = time.perf_counter()
        for o in self.occurrences:
            if o["step"] < since:
                continue
            still = o is self.occurrences[-1] and o["kind"] in self._open
            unfinished = still and (self.signalled or in_call)
            end = now if unfinished or still and not o["calls"] else o["end"]
            line = 0
            if o["kind"] == "evaluation":
                code = _name_frame(o["stack"], self.training_code or set())
                if getattr(code, "co_name", "") == "<module>":  # the script's own lines: the one
                    line = next(n for c, n in o["stack"] if c is code)  # (not its line 1)
            else:  # a checkpoint: the function that saved it, at its torch.save line
                code, line = o["stack"][-1] if o["stack"] else (None, 0)
            name = getattr(code, "co_qualname", None) or getattr(code, "co_name", "")
            out.append(
                {"kind": o["kind"], "step": o["step"], "calls": o["calls"],
                 "ms": round((end - o["start"]) * 1e3, 6),
                 "compiled": o["compiled"], "unfinished": unfinished,
                 "before": o.get("before", False),
                 "function": name,
                 "file": getattr(code, "co_filename", ""),
                 "line": line or getattr(code, "co_firstlineno", 0)}
            )  # fmt: skip
        return out


def _name_frame(stack: list[tuple[Any, int]], training: set[Any]) -> Any:
    own = [code for code, _ in stack if code not in training] or [c for c, _ in stack[-1:]]
    for code in own:
        if code.co_name.strip("_").lower().startswith(EVAL_WORDS):
            return code
    return own[0] if own else None


def _stack() -> list[tuple[Any, int]]:
    """The frames of the code calling now, outermost first, torch's and the probe's left
    out: (code, line)."""
    return [(f.f_code, f.f_lineno) for f in reversed(job_frames())]
