"""A recompile for a mode no graph of the frame had (grad on or off, train() or eval(),
autocast, inference mode): expected, one graph per mode. Which modes the frame's graphs
were made in, where each was called and which lines switched it, and what compiles
fewer - nothing to change where a framework's loop (its validation loop) switches the mode
and calls the model (`Entry.caller`)."""

from __future__ import annotations

import linecache
import os
import re
from dataclasses import dataclass, field

from compilediag.analysis.callers import EVALUATION, CalledBy, Caller, shown
from compilediag.analysis.history import Entry, History
from compilediag.analysis.recompiles.guards import is_mode_switch, parse_guard
from compilediag.analysis.recompiles.nearest import case_reasons
from compilediag.paths import installed_package, is_library_file, library_path, possessive
from compilediag.trace.compiles import Frame, unranked
from compilediag.trace.formats import (
    GUARDS_AUTOCAST,
    GUARDS_GRAD_MODE,
    GUARDS_TRAINING,
    RECOMPILE_LIMIT,
)

SECOND_COMPILE = (
    "A second torch.compile(model) would not help: torch caches graphs on the code object "
    "({}'s), so it shares these graphs and compiles the same."
)
# the user's code that switches a mode: a decorator or `with` (torch.no_grad(),
# torch.inference_mode(), torch.autocast(...), ...), a module's eval() or train()
MODE_CODE = re.compile(
    r"\b(?:no_grad|inference_mode|enable_grad|set_grad_enabled|autocast)\b|\.eval\(\)|\.train\("
)
MODULE_MODE_CODE = re.compile(r"\.eval\(\)|\.train\(")
EVALUATING = re.compile(r"no_grad|inference_mode|\.eval\(\)|\.train\(\s*False")
DEF = re.compile(r"(?:async\s+)?def\s")
# what a line switches, by the mode kinds graph_mode names: a graph that differs only in grad
# mode was not switched by a `model.eval()` beside its `no_grad()`
SWITCHES = {
    "grad": re.compile(r"\b(?:no_grad|inference_mode|enable_grad|set_grad_enabled)\b"),
    "training": MODULE_MODE_CODE,
    "autocast": re.compile(r"\bautocast\b"),
}


def graph_mode(e: Entry) -> dict[str, str]:
    """The mode a compile's graph was made in, as its own guards state it (2.11+)."""
    guards, mode = e.compile.guards, {}
    if m := GUARDS_GRAD_MODE.search(guards):
        mode["grad"] = "grad on" if m["v"] == "true" else "grad off"
    if m := GUARDS_AUTOCAST.search(guards):
        mode["autocast"] = "autocast" if "true" in m["v"] else "no autocast"
    flags = {m["v"] for m in GUARDS_TRAINING.finditer(guards)}
    if flags:
        mode["training"] = {"True": "train()", "False": "eval()"}.get(
            flags.pop() if len(flags) == 1 else "", "train() and eval() modules"
        )
    return mode


def caller_frames(e: Entry) -> list[Frame]:
    """The user's frames that led to the compiled frame, outermost first, up to the call of
    the compiled model or function (the frames inside it are the compiled code's own)."""
    stack = e.compile.stack
    into = next((i for i, f in enumerate(stack) if "torch/_dynamo/" in f.file), len(stack))
    frames = [f for f in stack[:into] if not is_library_file(f.file)]
    if frames and (frames[-1].name, frames[-1].line) == (e.code.name, e.code.line):
        frames.pop()  # the compiled frame itself (a module compiled in place: no Dynamo frame)
    return frames


def compiled_in_place(e: Entry) -> bool:
    """The frame's module was compiled in place (`model.compile()`, `block.compile()` in a
    loop): nn.Module's own call reaches it with no torch._dynamo wrapper on the stack, or
    calls torch._dynamo's wrapper itself (its compiled call); there is no uncompiled module
    to call."""
    stack = [f for f in e.compile.stack if "/_compilediag_runtime/" not in f.file]  # `run`'s
    into = next((i for i, f in enumerate(stack) if "torch/_dynamo/" in f.file), None)
    if into is not None:
        return into > 0 and _module_call(stack[into - 1])
    return any(_module_call(f) for f in stack)


def _module_call(f: Frame) -> bool:
    return f.name == "_wrapped_call_impl" and f.file.endswith("torch/nn/modules/module.py")


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip())


def switching_lines(f: Frame) -> list[tuple[int, str]]:
    """The lines above a call, in its function, that set a mode: the blocks around it
    (`with torch.no_grad():`), the function's decorators (`@torch.no_grad()`), and the
    statements before the call in those blocks that put a module in a mode (`model.eval()`).
    At module level, only the blocks around it."""
    lines = linecache.getlines(f.file)
    if not lines or not 0 < f.line <= len(lines):
        return []
    found: list[tuple[int, str]] = []
    level = _indent(lines[f.line - 1])
    for n in range(f.line - 1, 0, -1):
        text = lines[n - 1].split("#", 1)[0].rstrip()
        if not text.strip():
            continue
        code, indent = text.strip(), _indent(text)
        if indent < level and code.endswith(":"):  # a block around the call
            level = indent
            if DEF.match(code):
                k = n - 1
                while k >= 1 and lines[k - 1].strip().startswith("@"):
                    if MODE_CODE.search(lines[k - 1]):
                        found.append((k, lines[k - 1].strip()))
                    k -= 1
                break
            if code.startswith(("with ", "async with ")) and MODE_CODE.search(code):
                found.append((n, code))
        elif indent <= level and f.name != "<module>" and MODULE_MODE_CODE.search(code):
            found.append((n, code))  # before the call in a block around it, not a branch beside it
        if level == 0:
            break
    return sorted(found)


@dataclass
class ModeGraph:
    """One graph of a frame that ran in several modes: its mode, and where it was called."""

    mode: dict[str, str]
    call: Frame | None  # the line that called the compiled model, where the stack has it
    switches: list[tuple[Frame, int, str]]  # the lines that set its mode (frame, line, code)
    # who called it: a framework's loop (or the library) calls the model, and switches its
    # mode, with no line of the user's in between
    caller: Caller = field(default_factory=Caller)

    @property
    def loops(self) -> bool:
        """A framework's loop or the library made the call, not a line of the user's."""
        return self.caller.by in (CalledBy.FRAMEWORK, CalledBy.LIBRARY) and self.call is not None

    def switched(self, differ: list[str]) -> list[tuple[Frame, int, str]]:
        """The lines that switched a mode its graphs differ in (all of them where none
        says which)."""
        return [
            x for x in self.switches if any(SWITCHES[k].search(x[2]) for k in differ)
        ] or self.switches

    def evaluating(self, differ: list[str]) -> bool:
        """The evaluation graph: grad off or eval() where the graphs differ in it, or called
        under a line that says so (`@torch.no_grad()`, `model.eval()`)."""
        said = " ".join(self.mode.get(k, "") for k in differ)
        return (
            "grad off" in said
            or "eval()" in said
            or any(EVALUATING.search(code) for _, _, code in self.switches)
        )


def mode_graph(e: Entry) -> ModeGraph:
    c = e.caller
    if c.by in (CalledBy.FRAMEWORK, CalledBy.LIBRARY) and c.frame is not None:
        # a framework's loop called the model: the lines of its own that switched the mode
        loop = [f for f in c.through if installed_package(f.file)]
        return ModeGraph(graph_mode(e), c.frame, _innermost_switches(loop), c)
    callers = caller_frames(e)
    return ModeGraph(graph_mode(e), callers[-1] if callers else None, _innermost_switches(callers))


def _innermost_switches(frames: list[Frame]) -> list[tuple[Frame, int, str]]:
    """The lines that set a mode in the innermost of `frames` (outermost first) that has any."""
    for f in reversed(frames):
        if switches := [(f, n, code) for n, code in switching_lines(f)]:
            return switches
    return []


def mode_advice(h: History, e: Entry) -> str:
    """A recompile for a mode no graph of the frame had: expected, one graph per mode; how
    many compiles the frame's modes cost (its first compile and each mode switch of the
    report), where each mode's graph was called and which lines switched it, and what
    compiles fewer. The same text for each frame called the same way, so it is said once."""
    graphs = frame_graphs(h, e)
    n = len(graphs)
    differ = [
        kind
        for kind in ("grad", "training", "autocast")
        if len({g.mode.get(kind, "") for g in graphs}) > 1
    ]
    said = [
        f"Expected: one graph per mode. This frame ran in {n} modes and torch compiles it once "
        f"for each: {n} compiles; later calls reuse their mode's graph, so switching back and "
        "forth compiles nothing more."
    ]
    if differ or any(g.call for g in graphs):
        items = [_graph_item(i, g, differ) for i, g in enumerate(graphs)]
        said.append("Its graphs: " + "; ".join(items) + ".")
    fewer = _compile_fewer(graphs, differ, compiled_in_place(e))
    said.append(fewer)
    if {"grad", "training"} <= set(differ) and not fewer.startswith("Nothing to change"):
        said.append(
            "Evaluating with grad on would not remove it: the graphs differ in train()/eval() "
            "as well."
        )
    # the frame's own function (a resume frame's: the function it resumes)
    said.append(SECOND_COMPILE.format(e.code.shown.split(" (", 1)[0] or "forward"))
    return " ".join(said)


def frame_graphs(h: History, e: Entry) -> list[ModeGraph]:
    """The graphs of the frame's modes: its first compile's and each mode switch's (a
    compile refused at the recompile limit made none)."""
    frame = [k for k in h.frame_of(e) if not RECOMPILE_LIMIT.search(k.metrics.fail_reason)]
    return [mode_graph(k) for k in frame[:1]] + [
        mode_graph(k)
        for k in frame[1:]
        if is_mode_switch([parse_guard(r) for r in case_reasons(h, k)])
    ]


def _graph_item(i: int, g: ModeGraph, differ: list[str]) -> str:
    """One graph in words: its mode where the graphs differ, where it was called, and the
    lines that switched it."""
    label = ", ".join(g.mode[k] for k in differ if k in g.mode) or f"mode {i + 1}"
    place = []
    if g.loops and g.call:
        place.append(f"called by {possessive(_whose(g))} {shown(g.call)}")
    elif g.call:
        place.append(f"called at {os.path.basename(g.call.file)}:{g.call.line}")
        if g.call.name and g.call.name != "<module>":
            place[-1] += f" in {g.call.name}"
    if switches := g.switched(differ):
        f = switches[0][0]
        lines = " and ".join(f"line {ln} `{code}`" for _, ln, code in switches)
        here = g.call is not None and (f.file, f.name) == (g.call.file, g.call.name)
        if g.loops and installed_package(f.file):
            # the framework's own lines: named as its, in its file (never the user's to edit)
            place.append(
                f"switched by {possessive(_whose(g))} `{f.name}` at {lines} "
                f"({library_path(f.file) or f.file})"
            )
        else:
            place.append(f"switched by {lines}" if here else f"switched in {f.name} by {lines}")
    return f"{label} ({', '.join(place)})" if place else label


def _whose(g: ModeGraph) -> str:
    return g.caller.framework or g.caller.package


def _framework_loops(graphs: list[ModeGraph], differ: list[str]) -> str:
    """Where the graphs the user would run uncompiled (evaluation's, else every mode's) are
    all called by a framework's loop (or the library), with no line of the user's in
    between: nothing to change, and the loop named. '' where a line of the user's calls
    one of them."""
    evaluation = [g for g in graphs if g.evaluating(differ)]
    moved = evaluation if evaluation and len(evaluation) < len(graphs) else graphs
    if not moved or not all(g.loops for g in moved):
        return ""
    g = moved[0]
    loop = g.caller.evaluation_loop() if evaluation and moved is evaluation else g.call
    whose = _whose(g)
    named = loop is not None and EVALUATION.search(f"{loop.name} {os.path.basename(loop.file)}")
    what = "validation loop" if moved is evaluation and named else "loop"
    at = f" ({shown(loop)})" if loop else ""
    return (
        f"Nothing to change: one graph per mode is expected here. {possessive(whose)} "
        f"{what}{at} switches the mode and calls the model, not a line of yours; each "
        "mode compiles once, and later calls reuse its graph."
    )


def _compile_fewer(graphs: list[ModeGraph], differ: list[str], in_place: bool) -> str:
    """What compiles fewer: evaluation run uncompiled (at its calls, where the stack names
    them) when some graphs are evaluation's, else the rarer mode's calls; nothing, where
    those calls are a framework's loop's. A module compiled in place has no uncompiled
    module to call: set_stance alone."""
    if said := _framework_loops(graphs, differ):
        return said
    evaluation = [g for g in graphs if g.evaluating(differ)]
    stance = '`with torch.compiler.set_stance("force_eager"):`'
    if in_place:
        how = (
            f"wrap the calls in {stance} (the module was compiled in place, with .compile(): "
            "there is no uncompiled module to call)"
        )
    if not evaluation or len(evaluation) >= len(graphs):
        if not in_place:
            how = f"call the module you passed to torch.compile there, or wrap them in {stance}"
        return f"To compile fewer, run the calls of the rarer mode uncompiled: {how}."
    training = {(c.file, c.line) for g in graphs if g not in evaluation and (c := g.call)}
    calls = dict.fromkeys(_evaluation_place(g, training, differ) for g in evaluation if g.call)
    in_ = f"{' and '.join(calls)}, " if calls else ""
    if not in_place:
        how = (
            "call the module you passed to torch.compile rather than the compiled one, or "
            f"wrap the calls in {stance}"
        )
    return (
        f"To compile it for training only, run evaluation uncompiled: {in_}{how}; "
        "evaluation then runs in eager mode."
    )


def _evaluation_place(g: ModeGraph, training: set[tuple[str, int]], differ: list[str]) -> str:
    """`at eval.py:12 (in validate)`: where an evaluation graph's calls are to run uncompiled;
    where training calls the compiled module from the same line (a loop over blocks compiled
    each in place), under the line that switched evaluation's mode instead."""
    c = g.call
    assert c is not None
    if (c.file, c.line) in training and (switches := g.switched(differ)):
        f, line, code = switches[0]
        where = f"in {f.name}: " if f.name != "<module>" else ""
        return f"under {os.path.basename(f.file)}:{line} ({where}`{code}`)"
    if (c.file, c.line) in training:
        return (
            f"where your evaluation calls the model (not at {os.path.basename(c.file)}:{c.line}, "
            "which training's calls pass through too)"
        )
    return f"at {os.path.basename(c.file)}:{c.line}" + (
        f" (in {c.name})" if c.name != "<module>" else ""
    )


def evaluation_modes(h: History) -> list[str]:
    """The graphs (compile ids) a frame made with grad off or in eval() where it also has
    one made to train (grad on, train()), by their own guards: an evaluation's, where no
    run's probe counted the calls (look 28: a nanoGPT trace read "ranks diverge", rank 0's
    0/0 its estimate_loss graph, rank 1's its training graph)."""
    modes = [(e, graph_mode(e)) for e in h.entries if e.graph]

    def evaluating(mode: dict[str, str]) -> bool:
        return mode.get("grad") == "grad off" or mode.get("training") == "eval()"

    trains = {e.id.frame for e, m in modes if m.get("grad") == "grad on" and not evaluating(m)}
    return [unranked(e.compile_id) for e, m in modes if evaluating(m) and e.id.frame in trains]
