"""A step in parts: each moment of a step given to one part, from the marks the probe made
at each part's start and end, so that the parts add up to the step."""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Any

Mark = tuple[str, bool, str, Any]  # (part, entered, compile id, a clock reading or CUDA event)


class Part(str, Enum):  # noqa: UP042 - the job's Python may predate StrEnum (3.11)
    """What a mark opens or closes."""

    GRAPH = "g"  # a forward graph's call
    BACKWARD_GRAPH = "G"  # a compiled backward graph's call
    ENTRY = "e"  # a call of what torch.compile returned
    EVALUATION = "v"  # ... made under no_grad or with the module in eval mode: evaluation
    CHECKPOINT = "k"  # torch.save outside compiled code
    BACKWARD = "b"  # autograd's engine (backward(), grad())
    OPTIMIZER = "o"  # an optimizer step
    DATA = "d"  # a data loader's next batch


OUTER = (Part.BACKWARD, Part.OPTIMIZER, Part.DATA)  # parts that hold the moments inside them
OTHER_WORK = (Part.EVALUATION, Part.CHECKPOINT)  # not training: a span of its own


class StepParts:
    """Seconds per part, of one step or summed over several: the forward graphs and the
    eager Python after each (by compile id), the backward graphs and the eager backward
    before each, the rest of backward, the optimizer, data, evaluation, what remains."""

    def __init__(self) -> None:
        self.step = 0.0
        self.graph: dict[str, float] = {}
        self.gap: dict[str, float] = {}
        self.bgraph: dict[str, float] = {}
        self.bgap: dict[str, float] = {}
        self.backward = 0.0
        self.optimizer = 0.0
        self.data = 0.0
        self.evaluation = 0.0
        self.outside = 0.0

    def add(self, other: StepParts) -> None:
        for mine, theirs in (
            (self.graph, other.graph), (self.gap, other.gap), (self.bgraph, other.bgraph),
            (self.bgap, other.bgap),
        ):  # fmt: skip
            for key, seconds in theirs.items():
                _add(mine, key, seconds)
        for name in ("step", "backward", "optimizer", "data", "evaluation", "outside"):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def row(self) -> list[float]:
        """[the step, forward, backward, optimizer, data, the rest, evaluation] in ms."""
        forward = sum(self.graph.values()) + sum(self.gap.values())
        backward = self.backward + sum(self.bgraph.values()) + sum(self.bgap.values())
        parts = [self.step, forward, backward, self.optimizer, self.data, self.outside]
        return [round(x * 1e3, 6) for x in [*parts, self.evaluation]]

    def regions(self, per: float = 1e3) -> dict[str, list[float]]:
        """{compile id: [forward graph, Python after it, backward graph, eager backward
        before it]}, in ms (times `per`/1e3)."""
        return {
            c: [round(table.get(c, 0.0) * per, 6) for table in (self.graph, self.gap,
                                                                self.bgraph, self.bgap)]
            for c in dict.fromkeys([*self.graph, *self.bgraph])
        }  # fmt: skip


def split_step(
    start: Any, marks: list[Mark], end: Any, seconds: Callable[[Any, Any], float],
    by_entry: bool, training: bool,
) -> StepParts:  # fmt: skip
    """One step's parts. In a `training` job (one that steps an optimizer), its other work,
    an evaluation's calls and a checkpoint's save (from the first one's start to the last
    one's end, with what the job did between them: its batches, its reads of the loss), is
    the evaluation part's; the moments before and after are split as a training step's. (A
    job that only evaluates: its calls are steps.)"""
    out = StepParts()
    out.step = seconds(start, end)
    opened = [i for i, m in enumerate(marks) if m[0] in OTHER_WORK and m[1] and training]
    closed = [i for i, m in enumerate(marks) if m[0] in OTHER_WORK and not m[1]]
    if not opened:
        _split(out, start, marks, end, seconds, by_entry)
        return out
    first, last = opened[0], max(closed, default=len(marks) - 1)
    _split(out, start, marks[:first], marks[first][3], seconds, by_entry)
    out.evaluation += seconds(marks[first][3], marks[last][3])
    _split(out, marks[last][3], marks[last + 1 :], end, seconds, by_entry)
    return out


def _split(
    out: StepParts, start: Any, marks: list[Mark], end: Any,
    seconds: Callable[[Any, Any], float], by_entry: bool,
) -> None:  # fmt: skip
    """Inside backward, the optimizer or the data loader (the outermost of them, where one
    holds another), the moment is that part's, but for a closure's: a compiled call or a
    backward run inside an optimizer's step (optimizer.step(closure): Lightning's automatic
    optimisation, L-BFGS) is the step's forward and backward, not the optimizer's. Else in
    a forward graph, the graph's; else between the end of a graph and the start of the next
    one in the same compiled call (where calls are not seen: the same step), the first
    graph's gap; else what remains. Inside backward: in a backward graph, its; between two
    backward graphs, the gap of the second (its forward ran first: the eager backward of the
    code after it); else the rest of backward."""
    outer: list[str] = []  # the parts open that hold others
    closure = 0  # compiled calls under way that began inside an optimizer's step
    graph = bgraph = None  # the forward graph, the backward graph, under way
    after = bafter = None  # the graph that ended last (in the compiled call; in backward)
    waiting = bwaiting = 0.0  # the time since then, given once it is known whose it is
    calls = 0 if by_entry else 1  # compiled calls under way (unseen: always in one)
    prev = start
    for part, entered, cid, mark in [*marks, ("", False, "", end)]:
        s = seconds(prev, mark)
        prev = mark
        where = outer[0] if outer else ""
        if where == Part.OPTIMIZER and Part.BACKWARD in outer:
            where = Part.BACKWARD  # a closure's backward
        elif where == Part.OPTIMIZER and closure:
            where = ""  # a closure's forward
        if where == Part.BACKWARD:
            if bgraph is not None:
                _add(out.bgraph, bgraph, s)
            else:
                bwaiting += s
        elif where == Part.OPTIMIZER:
            out.optimizer += s
        elif where == Part.DATA:
            out.data += s
        elif graph is not None:
            _add(out.graph, graph, s)
        elif after is not None:
            waiting += s
        else:
            out.outside += s
        if part == Part.GRAPH:
            if entered:
                if after is not None:
                    _add(out.gap, after, waiting)
                graph, after, waiting = cid, None, 0.0
            else:
                forward = not outer or (closure and outer == [Part.OPTIMIZER])
                graph, after = None, (cid if calls and forward else None)
        elif part == Part.BACKWARD_GRAPH:
            if entered:
                if bafter is not None:
                    _add(out.bgap, cid, bwaiting)
                else:
                    out.backward += bwaiting
                bgraph, bafter, bwaiting = cid, None, 0.0
            else:
                bgraph, bafter = None, cid
        elif part == Part.CHECKPOINT:
            pass
        elif part in (Part.ENTRY, Part.EVALUATION):
            calls += 1 if entered else -1
            if Part.OPTIMIZER in outer:
                closure = max(0, closure + (1 if entered else -1))
            if not entered and calls <= 0:  # after the call's last graph: what remains
                out.outside += waiting
                calls, after, waiting = 0, None, 0.0
        elif entered:
            outer.append(part)
        elif part in outer:
            del outer[len(outer) - 1 - outer[::-1].index(part)]  # the innermost of its kind
            if part == Part.BACKWARD and Part.BACKWARD not in outer:
                out.backward += bwaiting
                bgraph, bafter, bwaiting = None, None, 0.0
    out.outside += waiting  # after the step's last graph
    out.backward += bwaiting


def _add(table: dict[str, float], key: str, seconds: float) -> None:
    table[key] = table.get(key, 0.0) + seconds
