"""A step in parts: each moment of a step given to one part, from the marks the probe made
at each part's start and end, so that the parts add up to the step; and the marks of each
compiled graph's backward (BackwardMarks)."""

from __future__ import annotations

import sys
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
    HOOKS = "w"  # a sharding wrapper's hook (FSDP2's unshard and reshard, forward and backward)


# a HOOKS mark's compile-id field: which hook; the forward of the wrapped model runs from the
# start of its outermost pre-forward to the end of the matching post-forward
PRE_FORWARD, POST_FORWARD = "f+", "f-"


OUTER = (Part.BACKWARD, Part.OPTIMIZER, Part.DATA)  # parts that hold the moments inside them
OTHER_WORK = (Part.EVALUATION, Part.CHECKPOINT)  # not training: a span of its own


class StepParts:
    """Seconds per part, of one step or summed over several: the forward graphs and the
    eager Python after each (by compile id), the backward graphs and the eager backward
    before each, the rest of backward, the optimizer, data, evaluation, what remains; in a
    sharded model's forward its wrapper's hooks (their collectives and the waits in them)
    and its eager code outside compiled calls, in backward the hooks (of backward)."""

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
        self.hooks = 0.0
        self.module = 0.0
        self.bhooks = 0.0
        self.call = 0.0  # in a compiled call outside its graphs: Dynamo's guard checks, its code

    def add(self, other: StepParts) -> None:
        for mine, theirs in (
            (self.graph, other.graph), (self.gap, other.gap), (self.bgraph, other.bgraph),
            (self.bgap, other.bgap),
        ):  # fmt: skip
            for key, seconds in theirs.items():
                _add(mine, key, seconds)
        for name in PLAIN:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def row(self) -> list[float]:
        """[the step, forward, backward, optimizer, data, the rest, evaluation, of forward
        the wrapper's hooks and its eager code, of backward the hooks, of forward the
        compiled calls' own work outside their graphs] in ms."""
        forward = sum(self.graph.values()) + sum(self.gap.values()) + self.hooks + self.module
        forward += self.call
        backward = self.backward + sum(self.bgraph.values()) + sum(self.bgap.values())
        parts = [self.step, forward, backward + self.bhooks, self.optimizer, self.data]
        more = [self.outside, self.evaluation, self.hooks, self.module, self.bhooks, self.call]
        return [round(x * 1e3, 6) for x in [*parts, *more]]

    def regions(self, per: float = 1e3) -> dict[str, list[float]]:
        """{compile id: [forward graph, Python after it, backward graph, eager backward
        before it]}, in ms (times `per`/1e3)."""
        return {
            c: [round(table.get(c, 0.0) * per, 6) for table in (self.graph, self.gap,
                                                                self.bgraph, self.bgap)]
            for c in dict.fromkeys([*self.graph, *self.bgraph])
        }  # fmt: skip


PLAIN = ("step", "backward", "optimizer", "data", "evaluation", "outside", "hooks", "module",
         "bhooks", "call")  # fmt: skip


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
    graph's gap; else in a compiled call (before its first graph, after its last: Dynamo's
    guard checks, its code), the call's own; else what remains. Inside backward: in a
    backward graph, its; between two backward graphs, the gap of the second (its forward ran
    first: the eager backward of the code after it); else the rest of backward. A wrapper's hook's moment (HOOKS) is its
    own, in backward or forward; between the wrapped model's outermost pre-forward and
    post-forward, a moment outside any compiled call is the model's (its eager code)."""
    split = _Splitter(out, by_entry)
    prev = start
    for part, entered, cid, mark in [*marks, ("", False, "", end)]:
        where = split.where()
        split.give(seconds(prev, mark), where)
        prev = mark
        split.see(part, entered, cid, where)
    out.outside += split.waiting  # after the step's last graph
    out.backward += split.bwaiting


class _Splitter:
    """_split's state between two marks."""

    def __init__(self, out: StepParts, by_entry: bool) -> None:
        self.out = out
        self.outer: list[str] = []  # the parts open that hold others
        self.closure = 0  # compiled calls under way that began inside an optimizer's step
        self.graph: str | None = None  # the forward graph under way
        self.bgraph: str | None = None  # the backward graph under way
        self.after: str | None = None  # the graph that ended last in the compiled call
        self.bafter: str | None = None  # ... in backward
        self.waiting = self.bwaiting = 0.0  # the time since then, given once it is known whose
        self.calls = 0 if by_entry else 1  # compiled calls under way (unseen: always in one)
        self.entries = 0  # ... of them, seen (their start and end marked)
        self.hooked = 0  # the wrapper's hooks under way
        self.depth = 0  # its modules' forwards under way

    def where(self) -> str:
        outer = self.outer
        where = outer[0] if outer else ""
        if where == Part.OPTIMIZER and Part.BACKWARD in outer:
            return Part.BACKWARD  # a closure's backward
        if where == Part.OPTIMIZER and self.closure:
            return ""  # a closure's forward
        return where

    def give(self, s: float, where: str) -> None:
        """The moment `s` since the last mark, to its part."""
        out = self.out
        if where == Part.BACKWARD and self.hooked:
            out.bhooks += s
        elif where == Part.BACKWARD:
            if self.bgraph is not None:
                _add(out.bgraph, self.bgraph, s)
            else:
                self.bwaiting += s
        elif where == Part.OPTIMIZER:
            out.optimizer += s
        elif where == Part.DATA:
            out.data += s
        elif self.hooked:
            out.hooks += s
        elif self.graph is not None:
            _add(out.graph, self.graph, s)
        elif self.after is not None:
            self.waiting += s
        elif self.depth:
            out.module += s
        elif self.entries:
            out.call += s
        else:
            out.outside += s

    def see(self, part: str, entered: bool, cid: str, where: str) -> None:
        """A mark: what opens or closes."""
        out, outer = self.out, self.outer
        if part == Part.GRAPH:
            if entered:
                if self.after is not None:
                    _add(out.gap, self.after, self.waiting)
                self.graph, self.after, self.waiting = cid, None, 0.0
            else:
                forward = not outer or (self.closure and outer == [Part.OPTIMIZER])
                self.graph, self.after = None, (cid if self.calls and forward else None)
        elif part == Part.BACKWARD_GRAPH:
            if entered:
                if self.bafter is not None:
                    _add(out.bgap, cid, self.bwaiting)
                else:
                    out.backward += self.bwaiting
                self.bgraph, self.bafter, self.bwaiting = cid, None, 0.0
            else:
                self.bgraph, self.bafter = None, cid
        elif part == Part.HOOKS:
            self.hooked = max(0, self.hooked + (1 if entered else -1))
            if not entered and cid in (PRE_FORWARD, POST_FORWARD) and where != Part.BACKWARD:
                self.depth = max(0, self.depth + (1 if cid == PRE_FORWARD else -1))
        elif part in (Part.ENTRY, Part.EVALUATION):
            self._call(entered)
        elif part == Part.CHECKPOINT:
            pass
        elif entered:
            outer.append(part)
        elif part in outer:
            del outer[len(outer) - 1 - outer[::-1].index(part)]  # the innermost of its kind
            if part == Part.BACKWARD and Part.BACKWARD not in outer:
                out.backward += self.bwaiting
                self.bgraph, self.bafter, self.bwaiting = None, None, 0.0

    def _call(self, entered: bool) -> None:
        """A compiled call's start or end."""
        self.calls += 1 if entered else -1
        self.entries = max(0, self.entries + (1 if entered else -1))
        if Part.OPTIMIZER in self.outer:
            self.closure = max(0, self.closure + (1 if entered else -1))
        if not entered and self.calls <= 0:  # after the call's last graph: what remains
            if self.depth:
                self.out.module += self.waiting
            else:
                self.out.call += self.waiting  # from the call's last graph to its return
            self.calls, self.after, self.waiting = 0, None, 0.0


def _add(table: dict[str, float], key: str, seconds: float) -> None:
    table[key] = table.get(key, 0.0) + seconds


class BackwardMarks:
    """Each compiled graph's backward, marked in the profiling window: the autograd Function
    AOTAutograd made for the graph (`CompiledFunction`, one class a graph; its node
    `CompiledFunctionBackward` one a call) gets its backward wrapped once, at its first call in
    the window, rather than two hooks made on the node at every call. Under compiled autograd
    (torch tracing the backward) the wrapper marks nothing."""

    def __init__(self, probe: Any) -> None:
        self.probe = probe
        self.timed: dict[int, tuple[Any, Any]] = {}  # id -> (the Function, its backward)

    def time(self, cid: str, out: Any) -> None:
        """The graph `cid` returned `out`: its Function's backward, wrapped where not yet."""
        for x in out if isinstance(out, (list, tuple)) else (out,):
            node = getattr(x, "grad_fn", None)
            if node is None:
                continue
            function = getattr(type(node), "_forward_cls", None)
            if function is not None and id(function) not in self.timed:
                if "CompiledFunction" in node.name():
                    self._wrap(function, cid)

    def _wrap(self, function: Any, cid: str) -> None:
        original = vars(function).get("backward")
        if original is None:
            return
        backward = original.__func__ if isinstance(original, staticmethod) else original
        probe = self.probe
        compiler = getattr(sys.modules.get("torch"), "compiler", None)
        compiling = getattr(compiler, "is_compiling", None) or (lambda: False)

        def timed_backward(ctx: Any, *grads: Any) -> Any:
            if compiling() or not probe.mark("G", True, cid):
                return backward(ctx, *grads)
            try:
                return backward(ctx, *grads)
            finally:
                probe.mark("G", False, cid)

        function.backward = staticmethod(timed_backward)
        self.timed[id(function)] = (function, original)

    def undo(self) -> None:
        for function, original in self.timed.values():
            function.backward = original
        self.timed.clear()
