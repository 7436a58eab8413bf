"""Recompilations: which frame compiled again, the failed guard in words, and the fix."""

from __future__ import annotations

import linecache
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass

from compilediag.analysis.history import Entry, FrameCode, History
from compilediag.analysis.source import assignments_in_function, call_argument, code_at
from compilediag.paths import Owner, is_library_file, is_own_file, possessive, resolve_file
from compilediag.report.model import GuardChange, LimitHit, Recompile
from compilediag.report.vocabulary import RecompileCause
from compilediag.trace.compiles import Frame
from compilediag.trace.formats import (
    AUTOGRAD_KEY,
    GLOBAL_STATE_MODE,
    GUARD_CID_PREFIX,
    GUARD_CONSTANT,
    GUARD_DISPATCH_KEYS,
    GUARD_FREED,
    GUARD_GLOBAL_STATE,
    GUARD_HINT,
    GUARD_LEN,
    GUARD_LOCATION,
    GUARD_LOWER_BOUND,
    GUARD_OBJ_ID,
    GUARD_RANGE,
    GUARD_SIZE,
    GUARD_STRING,
    GUARD_TENSOR_META,
    GUARD_TRAINING,
    GUARD_TYPE_ID,
    GUARD_USER_STACK,
    GUARDS_AUTOCAST,
    GUARDS_GRAD_MODE,
    GUARDS_TRAINING,
    RECOMPILE_LIMIT,
    RECOMPILE_LIMIT_VALUE,
    RESUME,
    STACK_FILE_LINE,
    float_specialised,
    frame_name,
    guard_pattern,
    guard_text,
    guard_value,
    guard_values,
    is_resume_frame,
    source_name,
)


@dataclass
class Guard:
    guard: str  # torch's text of the guard that failed
    words: str  # the same in words
    cause: RecompileCause
    suggestion: str
    file: str = ""  # the user line that installed the guard
    line: int = 0
    hint: str = ""  # torch's own hint, when it gives one
    # the line that installed it, the user's or a library's: the innermost of its stack
    at: tuple[str, int] = ("", 0)


def parse_guard(reason: str) -> Guard:
    text = GUARD_CID_PREFIX.sub("", reason.strip())
    head, _, stack = text.partition(GUARD_USER_STACK)
    first = head.splitlines()[0] if head else ""
    guard = first.split("  #", 1)[0].strip()
    hint_m = GUARD_HINT.search(head)
    loc = GUARD_LOCATION.search(first)
    file, line = "", 0
    frames = [f for f in STACK_FILE_LINE.finditer(stack) if not is_library_file(f["file"])]
    if frames:
        file, line = frames[-1]["file"], int(frames[-1]["line"])
    words, cause, suggestion = translate(guard)
    if hint_m and cause == "int":
        suggestion = hint_m["hint"].strip()
    g = Guard(guard, words, cause, suggestion, file, line, hint_m["hint"].strip() if hint_m else "")
    innermost = list(STACK_FILE_LINE.finditer(stack))[-1:]
    g.at = (innermost[0]["file"], int(innermost[0]["line"])) if innermost else (file, line)
    if not g.file and loc and not is_library_file(loc["file"]):
        # torch shortens this path ("main/models/net.py"); the caller resolves it
        g.file, g.line = loc["file"], int(loc["line"])
    return g


def size_change(guard: str) -> GuardChange | None:
    """A failed size guard as data (what `translate` puts in words)."""
    m = GUARD_SIZE.match(guard)
    if not m:
        return None
    return GuardChange(source_name(m["n"]), int(m["i"]), int(m["a"]), int(m["b"]))


# a symbolic stride guard of a dynamic graph
GUARD_STRIDE = re.compile(r"^(?P<n>[^\s=]+?)\.stride\(\)\[(?P<i>\d+)\] == (?P<v>.+?)\s*$")
STRIDE_ADVICE = (
    "`{name}` arrives with another memory layout than the graph's: a slice of a longer "
    "tensor (`x[:, -n:]`) or a transpose keeps the longer tensor's strides. Give it one "
    "layout every call: `.clone(memory_format=torch.contiguous_format)` where it is made "
    "(`.contiguous()` does not copy a view torch already counts as contiguous, such as one "
    "row)."
)


def sizes_0_1(name: str, dim: str) -> str:
    """Why a dynamic dim still recompiles for a size of 0 or 1, and what to keep it at."""
    return (
        " Sizes 0 and 1 are always specialised (broadcasting differs), so a dynamic dim "
        f"still recompiles for them: keep {name} dim {dim} at 2 or more (no batch of 1, no "
        "one-token prompt), or pad."
    )


def translate(guard: str) -> tuple[str, RecompileCause, str]:
    """A failed guard in words, its cause, and the advice that removes the recompile."""
    m = GUARD_SIZE.match(guard)
    if m:
        name, dim, a, b = source_name(m["n"]), m["i"], int(m["a"]), int(m["b"])
        advice = (
            f"Mark it dynamic before the first call: torch._dynamo.mark_dynamic({name}, {dim}); "
            "or compile with dynamic=True."
        )
        if {a, b} & {0, 1}:
            advice += sizes_0_1(name, dim)
        return f"{name} dim {dim} changed {a} → {b}", RecompileCause.SHAPE, advice
    m = GUARD_LOWER_BOUND.match(guard)
    if m:
        name = source_name(m["src"])
        return (
            f"{name} dim {m['i']} fell below {m['lo']}",
            RecompileCause.SHAPE,
            f"The graph made {name} dim {m['i']} dynamic for sizes >= 2; sizes 0 and 1 are always "
            "specialised (broadcasting differs), so they compile their own graph. Avoid them "
            "(e.g. pad a batch of 1), or accept one extra compile.",
        )
    m = GUARD_RANGE.match(guard)
    if m:
        name, dim, lo, hi = source_name(m["src"]), m["i"], m["lo"], m["hi"]
        return (
            f"{name} dim {dim} left {lo}..{hi}, the sizes its dynamic graph covers",
            RecompileCause.BOUNDED,  # already dynamic: mark_dynamic, dynamic=True cannot help
            f"A comparison of {name} dim {dim} in the code (where the guard was installed) "
            f"bounded the dynamic graph to sizes {lo} to {hi}; a size past the bound compiles "
            "another graph, for the other side of the comparison. Expected where the code "
            "must branch on the size; otherwise compute both sides as tensors (torch.where) "
            "or move the branch out of the compiled code.",
        )
    m = GUARD_STRIDE.match(guard)
    if m:  # a dynamic graph's layout: `idx.stride()[0] == idx.size()[1]` (contiguous rows)
        name = source_name(m["n"])
        return (
            f"{name} stride {m['i']} is no longer {source_name(m['v'])}",
            RecompileCause.TENSOR_META,
            STRIDE_ADVICE.format(name=name),
        )
    m = GUARD_TENSOR_META.match(guard)
    if m:
        what = {"dispatch key set": "device or dispatch keys"}.get(m["what"], m["what"])
        detail = f" ({m['rest'].strip()})" if m["rest"].strip() else ""
        return (
            f"{source_name(m['n'])} {what} changed{detail}",
            RecompileCause.TENSOR_META,
            MODE_ADVICE
            if mode_switch(guard)
            else STRIDE_ADVICE.format(name=source_name(m["n"]))
            if m["what"] == "stride"
            else f"Call the compiled model with the same {what} every time, or convert the "
            "input first.",
        )
    m = GUARD_GLOBAL_STATE.match(guard)
    if m:
        what = m["what"].strip().replace("grad_mode", "grad mode")
        return (
            f"global state changed: {what}",
            RecompileCause.GLOBAL,
            MODE_ADVICE
            if mode_switch(guard)
            else f"A torch setting changed between calls ({what}): set it once before the "
            "first call (the same default dtype, number of threads, deterministic algorithms "
            "for every call), or accept one graph per setting.",
        )
    m = GUARD_TRAINING.match(guard)
    if m:
        return (
            f"module attribute `{source_name(m['src'])}.training` changed (was {m['v']})",
            RecompileCause.TRAINING,
            MODE_ADVICE,
        )
    m = GUARD_OBJ_ID.match(guard)
    if m:
        return (
            f"a different object for `{source_name(m['src'])}`",
            RecompileCause.OBJECT,
            "An object the code reads was replaced between calls (a new module, function or "
            "config object): create it once and reuse it.",
        )
    m = GUARD_FREED.match(guard)
    if m:
        return (
            f"`{source_name(m['src'])}` was freed, so the graph that guarded it was dropped",
            RecompileCause.OBJECT,
            "The compiled code read an object that was freed after the call (one made anew "
            "each call): create it once and keep it alive, so its graph is reused.",
        )
    m = GUARD_TYPE_ID.match(guard)
    if m:
        return (
            f"`{source_name(m['src'])}` has a different type",
            RecompileCause.TYPE,
            "Pass the same Python type every call (e.g. always a tensor, never None or a list).",
        )
    m = GUARD_LEN.match(guard)
    if m:
        return (
            f"length of `{source_name(m['src'])}` changed (was {m['n']})",
            RecompileCause.LENGTH,
            "Keep the container the same length, or stack it into one tensor.",
        )
    m = GUARD_STRING.match(guard)
    if m:
        src = source_name(m["src"].strip())
        return (
            f"{src} changed (was {m['v']}): a Python string is baked into the graph",
            RecompileCause.STRING,
            f"Each value of `{src}` compiles its own graph. Resolve it outside the compiled "
            f"code (e.g. pick the function once in __init__: self.fn = getattr(torch, {src})), "
            "so forward no longer reads the string.",
        )
    m = GUARD_CONSTANT.match(guard)
    if m:
        src, value = source_name(m["src"].strip()), m["v"]
        if "." in value or "e" in value:
            return (
                f"{src} changed (was {value}): a Python float is baked into the graph",
                RecompileCause.FLOAT,
                f"Pass `{src}` as a tensor (torch.tensor({value})), or compile with dynamic=True.",
            )
        return (
            f"{src} changed (was {value}): a Python int is baked into the graph",
            RecompileCause.INT,
            f"Make `{src}` a tensor or compile with dynamic=True; an int attribute of an "
            "nn.Module stays static unless torch._dynamo.config.allow_unspec_int_on_nn_module = True.",
        )
    return (
        guard,
        RecompileCause.OTHER,
        "See the guard above; TORCH_LOGS=recompiles_verbose shows every guard.",
    )


# --- a mode switch: one graph per mode -----------------------------------------------------

MODE_ADVICE = (
    "Expected: one graph per mode (grad on or off, train() or eval(), autocast, inference "
    "mode). Each mode compiles once and later calls reuse its graph, so switching back and "
    "forth costs one compile per mode. To compile fewer, run the rarer mode uncompiled: call "
    "the module you passed to torch.compile there, or wrap those calls in "
    '`with torch.compiler.set_stance("force_eager"):`.'
)
SECOND_COMPILE = (
    "A second torch.compile(model) would not help: torch caches graphs on the code object "
    "(forward's), so it shares these graphs and compiles the same."
)
# the user's code that switches a mode: a decorator or `with` (torch.no_grad(),
# torch.inference_mode(), torch.autocast(...), ...), a module's eval() or train()
MODE_CODE = re.compile(
    r"\b(?:no_grad|inference_mode|enable_grad|set_grad_enabled|autocast)\b|\.eval\(\)|\.train\("
)
MODULE_MODE_CODE = re.compile(r"\.eval\(\)|\.train\(")
EVALUATING = re.compile(r"no_grad|inference_mode|\.eval\(\)|\.train\(\s*False")
DEF = re.compile(r"(?:async\s+)?def\s")


def mode_switch(guard: str) -> str:
    """The mode a failed guard says changed (`grad mode`, `autocast`, `train()/eval()`,
    `inference mode`), or '' where it is not a mode: a setting such as the default dtype,
    or anything else."""
    m = GUARD_GLOBAL_STATE.match(guard)
    if m:
        fields = [GLOBAL_STATE_MODE.match(f) for f in m["what"].split()]
        if not fields or not all(fields):
            return ""
        names = ("grad mode" if f and f["mode"] == "grad_mode" else "autocast" for f in fields)
        return ", ".join(dict.fromkeys(names))
    if GUARD_TRAINING.match(guard):
        return "train()/eval()"
    m = GUARD_TENSOR_META.match(guard)
    keys = GUARD_DISPATCH_KEYS.search(guard) if m and m["what"] == "dispatch key set" else None
    if keys:
        a, b = ({k.strip() for k in keys[x].split(",") if k.strip()} for x in ("a", "b"))
        if a != b and all(AUTOGRAD_KEY.match(k) for k in a ^ b):
            return "inference mode"
    return ""


def is_mode_switch(guards: list[Guard]) -> bool:
    """Every cached graph of the frame failed on a mode: the call is in a mode no graph has."""
    return bool(guards) and all(mode_switch(g.guard) for g in guards)


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
    return [f for f in stack[:into] if not is_library_file(f.file)]


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
    call: Frame | None  # the user's line that called the compiled model, where the stack has it
    switches: list[tuple[Frame, int, str]]  # the lines that set its mode (frame, line, code)

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
    callers = caller_frames(e)
    switches: list[tuple[Frame, int, str]] = []
    for f in reversed(callers):  # the innermost function that sets a mode
        switches = [(f, n, code) for n, code in switching_lines(f)]
        if switches:
            break
    return ModeGraph(graph_mode(e), callers[-1] if callers else None, switches)


def mode_advice(h: History, e: Entry) -> str:
    """A recompile for a mode no graph of the frame had: expected, one graph per mode; how
    many compiles the frame's modes cost (its first compile and each mode switch of the
    report), where each mode's graph was called and which lines switched it, and what
    compiles fewer. The same text for each frame called the same way, so it is said once."""
    frame = [k for k in h.frame_of(e) if not RECOMPILE_LIMIT.search(k.metrics.fail_reason)]
    graphs = [mode_graph(k) for k in frame[:1]] + [
        mode_graph(k) for k in frame[1:] if is_mode_switch([parse_guard(r) for r in _reasons(k)])
    ]
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
    items = []
    for i, g in enumerate(graphs):
        label = ", ".join(g.mode[k] for k in differ if k in g.mode) or f"mode {i + 1}"
        place = []
        if g.call:
            place.append(f"called at {os.path.basename(g.call.file)}:{g.call.line}")
            if g.call.name and g.call.name != "<module>":
                place[-1] += f" in {g.call.name}"
        if g.switches:
            f = g.switches[0][0]
            lines = " and ".join(f"line {ln} `{code}`" for _, ln, code in g.switches)
            here = g.call is not None and (f.file, f.name) == (g.call.file, g.call.name)
            place.append(f"switched by {lines}" if here else f"switched in {f.name} by {lines}")
        items.append(f"{label} ({', '.join(place)})" if place else label)
    if differ or any(g.call for g in graphs):
        said.append("Its graphs: " + "; ".join(items) + ".")
    evaluation = [g for g in graphs if g.evaluating(differ)]
    if evaluation and len(evaluation) < n:
        calls = dict.fromkeys(
            f"{os.path.basename(c.file)}:{c.line}"
            + (f" (in {c.name})" if c.name != "<module>" else "")
            for c in (g.call for g in evaluation)
            if c
        )
        in_ = f"at {' and '.join(calls)}, " if calls else ""
        said.append(
            f"To compile it for training only, run evaluation uncompiled: {in_}call the module "
            "you passed to torch.compile rather than the compiled one, or wrap the calls in "
            '`with torch.compiler.set_stance("force_eager"):`; evaluation then runs in eager '
            "mode."
        )
    else:
        said.append(
            "To compile fewer, run the calls of the rarer mode uncompiled: call the module you "
            "passed to torch.compile there, or wrap them in "
            '`with torch.compiler.set_stance("force_eager"):`.'
        )
    if {"grad", "training"} <= set(differ):
        said.append(
            "Evaluating with grad on would not remove it: the graphs differ in train()/eval() "
            "as well."
        )
    said.append(SECOND_COMPILE)
    return " ".join(said)


STACK_VALUE = re.compile(r"`?___stack(\d+)`?")
TO_PYTHON = re.compile(r"\.(item|tolist)\(\)|\b(float|int|bool)\(")


def name_stack_values(g: Guard, co_name: str, co_file: str) -> Guard:
    """After a graph break the rest of the function runs as a frame of its own, and the
    value the breaking line made reaches it as `___stack0`: name it as the user wrote it,
    the variable the line assigns (`scale`) or the expression, with the line."""
    resume = RESUME.match(co_name)
    if not resume or not STACK_VALUE.search(g.words):
        return g
    line = int(resume["line"])
    code = code_at(co_file, line).strip()
    assigned = re.match(r"(\w+)\s*=(?!=)\s*(.+)", code)
    expr = assigned[2] if assigned else code
    if not expr:
        return g
    name = f"`{assigned[1]}` (line {line}: `{expr}`)" if assigned else f"`{expr}` (line {line})"
    g.words = STACK_VALUE.sub(name, g.words, count=1)
    if g.cause in ("float", "int") and (made := TO_PYTHON.search(expr)):
        call = made[0] if made[0].startswith(".") else made[0] + "…)"
        g.suggestion = (
            f"Line {line} turns a tensor into a Python number (`{call}`), and each new value "
            f"compiles this frame again: keep it a 0-d tensor (drop `{call}`), or set "
            "torch._dynamo.config.capture_scalar_outputs = True, which also keeps the graph "
            f"whole at line {line}."
        )
    else:
        g.suggestion = STACK_VALUE.sub(name, g.suggestion)
    return g


def shape_dims(guards: list[Guard]) -> list[tuple[str, str]]:
    """(input, dim) of every size guard that failed, in order, once each."""
    dims = []
    for g in guards:
        m = GUARD_SIZE.match(g.guard) or GUARD_LOWER_BOUND.match(g.guard)
        if m:
            dims.append((source_name(m["n"] if "n" in m.groupdict() else m["src"]), m["i"]))
    return list(dict.fromkeys(dims))


def specialised(guards: list[Guard]) -> bool:
    """The new graph is a size-0/1 specialisation (a dynamic dim got 0 or 1, or a static one
    changed to 0 or 1), not torch's automatic dynamic."""
    for g in guards:
        if GUARD_LOWER_BOUND.match(g.guard):
            return True
        m = GUARD_SIZE.match(g.guard)
        if m and int(m["b"]) in (0, 1):
            return True
    return False


def became_dynamic(e: Entry) -> bool:
    """The recompiled graph has symbolic sizes: torch's automatic dynamic kicked in."""
    return "Sym(" in e.compile.output_graph or e.metrics.shape_env_guard_count > 0


def _reasons(e: Entry) -> list[str]:
    if e.compile.recompile_reasons:
        return list(e.compile.recompile_reasons)
    return [e.metrics.recompile_reason] if e.metrics.recompile_reason else []


def collect_recompiles(h: History) -> list[Recompile]:
    out = []
    dims_of: dict[object, list[tuple[str, str]]] = {}
    for e in h:
        reasons = _reasons(e)
        if not reasons:
            continue
        m = e.code
        guards = [name_stack_values(parse_guard(r), m.name, m.file) for r in reasons]
        # one failed guard per cached graph: where some graphs are of another mode, the
        # guard that says why is the one a graph of the same mode failed
        g = next((x for x in guards if not mode_switch(x.guard)), guards[0])
        co_file = m.file
        if g.file and not g.file.startswith(("/", "<")):
            g.file = co_file if co_file.endswith(g.file) else ""
            g.line = g.line if g.file else 0
        suggestion = g.suggestion
        if g.cause == "shape" and is_resume_frame(m.name):
            # the code after a graph break runs as its own function whose inputs are
            # forward's locals: the user can't mark those
            suggestion = (
                "The changed tensor is a local of forward here (after a graph break, the rest "
                "of forward runs as its own function, with forward's locals as inputs), so it "
                "can't be marked: mark the model input it is computed from dynamic before the "
                "first call (torch._dynamo.mark_dynamic(input, dim)), or compile with "
                "dynamic=True. Removing the graph break above removes this frame."
            )
        # every size guard that failed in the frame, over all its recompiles: one piece of
        # advice that covers every dim (batch, then sequence length, ...)
        key = e.id.frame_key
        if key not in dims_of:
            dims_of[key] = shape_dims([parse_guard(r) for k in h.frame_of(e) for r in _reasons(k)])
        dims = dims_of[key]
        if g.cause == "shape" and len(dims) > 1 and not is_resume_frame(m.name):
            marks = "; ".join(f"torch._dynamo.mark_dynamic({n}, {d})" for n, d in dims)
            suggestion = (
                f"{len(dims)} dims of this frame's inputs change across calls: mark each "
                f"dynamic before the first call: {marks}; or compile with dynamic=True."
            )
        if g.cause == RecompileCause.SHAPE and len(dims) <= 1 and (at := user_call(e, g)):
            suggestion = at
        dynamic = became_dynamic(e) and not specialised(guards)
        if g.cause == RecompileCause.FLOAT and any(
            float_specialised(k.metrics.restart_reasons) for k in h.frame_of(e)
        ):
            dynamic = False
            suggestion = (
                "torch tried to make it dynamic, but an op in the graph needs it as a Python "
                "number: torch restarted that compile and baked the value in, so every new "
                "value compiles again, up to the recompile limit (dynamic=True does the same). "
                + suggestion.split(", or compile with dynamic=True")[0]
                + " where the op takes a tensor, or keep it to a few values."
            )
        if g.cause in ("shape", "float") and dynamic:
            suggestion = (
                "torch already made it dynamic on this recompile (automatic dynamic), so later "
                "values reuse this graph. To skip this recompile too: "
                + suggestion[:1].lower()
                + suggestion[1:]
            )
        suggestion = state_advice(g, m.name, code_at(g.file, g.line)) or suggestion
        if package := inner_library_frame(e):
            suggestion = library_recompile_advice(package, g, e, dynamic)
        elif g.cause in ("shape", "bounded") and under_training_loop(e):
            suggestion = size_advice(g, dynamic)
        if is_mode_switch(guards):
            suggestion = mode_advice(h, e)
        suggestion = mutation_advice(g, m, e.compile.guards) or suggestion
        # (a graph of another mode is no cached graph this call could have used)
        also = [] if is_mode_switch(guards) else also_changed(h, e, g)
        if also:
            suggestion += (
                " torch names only the first guard that failed; this call also changed "
                + "; ".join(also)
                + ". A fix has to cover each of them."
            )
        file, line = e.place
        out.append(
            Recompile(
                hit_limit=bool(RECOMPILE_LIMIT.search(e.metrics.fail_reason)),
                frame=m.shown,
                file=file,
                line=line,
                compile_id=e.compile_id,
                reasons=[guard_text(r) for r in reasons],
                failed_guard=g.words,
                failed_guards=[x.words for x in guards],
                cause=g.cause,
                guard_file=g.file,
                guard_line=g.line,
                guard_code=code_at(g.file, g.line),
                automatic_dynamic=dynamic,
                suggestion=suggestion,
                change=size_change(g.guard),
                also_changed=also,
            )
        )
    return out


# the attribute chain a guard reads: `L['self'].config.problem_type`
# (2.13 writes the local by its name: `self.config.problem_type is None`), at the start of
# the guard or as the first argument of a check (`___check_obj_id(...)`)
ATTRIBUTE_CHAIN = re.compile(
    r"^(?:\w+\()?(?P<src>(?:[LG]\['[^']+'\]|[A-Za-z_]\w*)(?:\.\w+|\._modules\['[^']+'\])+)"
)


# an attribute read from the class: `not ___dict_contains('problem_type', self.config.__dict__)`
DICT_CONTAINS = re.compile(r"___dict_contains\('(?P<attr>\w+)', (?P<src>[^()]+?)\.__dict__\)")
# a value guard of the recompiled graph: `EQUALS_MATCH: L['self'].config.problem_type == 'x'`
EQUALS_GUARD = re.compile(r"EQUALS_MATCH: (?P<src>\S+) == (?P<v>.+?)(?:\s+#|$)", re.M)


def user_call(e: Entry, g: Guard) -> str:
    """A size guard on a parameter of the user's own compiled function (forward's `x`):
    the advice at the user's call that passed it (`mark_dynamic(input, 0)` at the line that
    calls the model), and, where the size shrank on dim 0, the loader's last batch. ''
    where the call or the argument is not found."""
    m = GUARD_SIZE.match(g.guard)
    if not m or e.code.owner != Owner.USER or is_resume_frame(e.code.name):
        return ""
    param, dim, a, b = source_name(m["n"]), m["i"], int(m["a"]), int(m["b"])
    if not param.isidentifier():
        return ""
    callers = [f for f in e.compile.stack if not is_library_file(f.file)]
    if callers and callers[-1].name == e.code.name:  # the compiled frame itself
        callers.pop()
    if not callers or is_own_file(callers[-1].file):  # compilediag's worker made the call
        return ""
    site = callers[-1]
    arg = call_argument(site.file, site.line, e.code.file, e.code.line, param)
    if not arg or not arg.isidentifier():
        return ""
    where = f"{os.path.basename(site.file)}:{site.line} (in {site.name})"
    text = (
        f"`{param}` is `{arg}` at the call, {where}: mark it dynamic there, before the call: "
        f"`torch._dynamo.mark_dynamic({arg}, {dim})`; or compile with dynamic=True."
    )
    if dim == "0" and b < a:
        text = (
            f"A smaller batch ({a} → {b}) reached the model at {where}: the loader's last, "
            "partial batch, most likely. `drop_last=True` on that loader (or padding the last "
            f"batch) removes the recompile; or mark the batch dim dynamic before the call: "
            f"`torch._dynamo.mark_dynamic({arg}, 0)`."
        )
    if {a, b} & {0, 1}:
        text += sizes_0_1(arg, dim)
    return text


def guarded_chain(guard: str) -> str:
    """The attribute chain a guard reads, as the user writes it (`self.config.problem_type`);
    '' where it reads no attribute of an object."""
    m = ATTRIBUTE_CHAIN.match(guard)
    d = DICT_CONTAINS.search(guard)
    if d:  # the attribute was the class's, and now the instance has its own
        chain = f"{source_name(d['src'])}.{d['attr']}"
    elif m:
        chain = source_name(m["src"])
    else:
        return ""
    return chain if "." in chain else ""


def set_by_model(chain: str, places: list[tuple[str, int]], guards: str) -> tuple[str, str]:
    """Where the model assigns `chain` (searched in the functions holding `places`, in
    order): the line, in words, and the statement that sets it before the first call, to
    the value the recompiled graph found (`guards`: that graph's tree, where it states the
    value); ('', '') where no such line is found."""
    found = next(
        ((f, hits) for f, n in places if f and (hits := assignments_in_function(f, n, chain))),
        None,
    )
    if found is None:
        return "", ""
    file, hits = found
    now = next(
        (m["v"] for m in EQUALS_GUARD.finditer(guards) if source_name(m["src"]) == chain), ""
    )
    line, value = next(((n, v) for n, v in hits if v == now), hits[0])
    root, _, rest = chain.partition(".")
    owner = "model" if root == "self" else root
    return (
        f"{os.path.basename(file)}:{line}: `{code_at(file, line)}`",
        f"{owner}.{rest} = {now or value}",
    )


def mutation_advice(g: Guard, code: FrameCode, guards: str = "") -> str:
    """A guard on an attribute that the model assigns (forward setting
    `self.config.problem_type` on its first call: searched in the function that installed
    the guard, then in the compiled frame's): the line that sets it, and the fix that
    removes the recompile - set it before the first call. '' for anything else."""
    chain = guarded_chain(g.guard)
    where, fix = set_by_model(chain, [g.at, (code.file, code.line)], guards) if chain else ("", "")
    if not where:
        return ""
    return (
        f"The model sets `{chain}` itself ({where}), so the next call finds a value the "
        f"graph was not compiled for and compiles again. Set it before the first call "
        f"(`{fix}`) and this recompile is gone."
    )


def also_changed(h: History, e: Entry, g: Guard) -> list[str]:
    """What else the call that recompiled changed, beyond the first failed guard torch
    names: the sources whose value guards differ between the cached graph's guard tree
    and the new graph's (each in words, with the fix where the model sets it itself)."""
    frame = h.frame_of(e)
    before = [k for k in frame[: frame.index(e)] if k.compile.guards]
    if not before or not e.compile.guards:
        return []
    old, new = guard_values(before[-1].compile.guards), guard_values(e.compile.guards)
    changed = [
        src for src in old
        if src in new and old[src] != new[src] and src.startswith(("L[", "G["))
    ]  # fmt: skip
    first = f"{g.guard} {g.words}"
    out = []
    for src in changed:
        if any(src != o and src.startswith(o) for o in changed):
            continue  # inside a changed object: said by its owner
        name = source_name(src)
        if re.search(rf"(?<![\w.]){re.escape(name)}(?![\w])", first):
            continue  # the guard torch named
        text = f"`{name}` ({guard_value(old[src])} → {guard_value(new[src])})"
        chain = name if "." in name else ""
        places = [(e.code.file, e.code.line)] + [
            (resolve_file(m["file"], e.code.file), int(m["line"]))
            for leaf in e.compile.guards.splitlines()
            if src in leaf and (m := GUARD_LOCATION.search(leaf))
        ]
        where, fix = set_by_model(chain, places[1:] + places[:1], e.compile.guards)
        if where:
            text += f": the model sets it itself ({where}); set it before the first call (`{fix}`)"
        out.append(text)
    return out


# a line that grows a container: `self.stats.append(x)`, `.extend(`, `.insert(`, `+= [`
GROWS = re.compile(r"\.(?:append|extend|insert)\(|\+=\s*\[")


def state_advice(g: Guard, co_name: str, code: str) -> str:
    """Forward changing Python state on every call: a container it grows (the length
    guard fails each call, until the recompile limit), or, after a graph break, the value
    that crosses the break as a new Python object each call. '' for anything else."""
    if g.cause == RecompileCause.LENGTH and code and GROWS.search(code):
        where = f"line {g.line}: `{code}`"
        return (
            f"forward changes Python state on every call ({where}): the container grows, "
            "so each call fails the length guard and compiles again, until the recompile "
            "limit. Keep per-step statistics outside forward (return the value and collect it "
            "in the training loop), or keep them in a tensor buffer updated in place "
            "(`self.register_buffer(...)`, then `.copy_()` or `+=`); the recompile is then gone."
        )
    if g.cause == RecompileCause.OBJECT and is_resume_frame(co_name) and "was freed" in g.words:
        return (
            f"After the graph break at line {g.line}, the value that line computes crosses "
            "into this frame as a new Python object on every call, so this frame's graph is "
            "dropped and compiled again each call. Remove the break (keep the value a "
            "tensor) and this frame, with its recompiles, goes away."
        )
    return ""


CALL_MACHINERY = ("torch/nn/modules/module.py", "torch/_dynamo/")


def inner_library_frame(e: Entry) -> str:
    """The installed package whose code this frame is, when that package also called it
    (its inputs are the library's own values); '' for the user's code, or a library
    frame the user called (an nn.Sequential's forward, a transformers model called with
    `model(**batch)`: they take the user's tensors). The caller is the innermost frame
    below the compiled one, torch's call machinery and compilediag's own frames passed
    over."""
    package = e.code.package if e.code.owner == Owner.LIBRARY else ""
    if not package:
        return ""
    stack = list(e.compile.stack)
    if stack and stack[-1].name == e.code.name:  # the frame being compiled: not its caller
        stack.pop()
    callers = [
        f for f in stack if not any(p in f.file for p in CALL_MACHINERY) and not is_own_file(f.file)
    ]
    caller = callers[-1].file if callers else ""
    if not caller or not is_library_file(caller):
        return ""
    return package


# frames of a training loop a framework runs for the user: the batches it passes are made
# from the user's data (a collator pads them)
TRAINING_LOOPS = ("transformers/trainer", "accelerate/", "lightning/", "pytorch_lightning/")


def under_training_loop(e: Entry) -> bool:
    """A framework's training loop (the Trainer, accelerate, Lightning) called the frame."""
    return any(any(t in f.file for t in TRAINING_LOOPS) for f in e.compile.stack)


def size_advice(g: Guard, dynamic: bool) -> str:
    """Sizes that change from call to call in the batches a framework's training loop
    passes (a collator's padding), which the user doesn't pass by hand."""
    made = (
        "It is a size of the batches the training loop passes: a collator padding each batch "
        "to its longest sequence changes it from batch to batch."
    )
    now = (
        "torch made it dynamic on this recompile (automatic dynamic), so later sizes reuse "
        "this graph: one more compile in all. To skip that one too: "
        if dynamic
        else "Each new size compiles again until it is dynamic: "
    )
    return (
        f"{made} {now}pad every batch to one length (the collator's "
        '`padding="max_length", max_length=N`; `pad_to_multiple_of=8` keeps the lengths '
        "few), or compile with dynamic=True"
        + " (under the Trainer or accelerate: ACCELERATE_DYNAMO_USE_DYNAMIC=1)."
    )


def library_recompile_advice(package: str, g: Guard, e: Entry, dynamic: bool = False) -> str:
    """A recompile of a library's frame that the library itself called: what the user can
    do from their side. Generation advice only where generate() is on the stack; sizes
    that change under a framework's training loop are the batches' own (a collator's
    padding)."""
    own, subject = possessive(package), guard_subject(g)
    head = f"This frame is {own} own code, called from inside {package}: "
    generating = any("generate" in f.name for f in e.compile.stack)
    if g.cause in ("shape", "bounded") and under_training_loop(e):
        return size_advice(g, dynamic)
    if package == "transformers" and g.cause in ("shape", "bounded") and generating:
        return (
            head + f"{subject} grows with the generated sequence. For shapes that stay the same "
            "from token to token (what Inductor's CUDA graphs need), give generate() a static "
            'KV cache (`generate(..., cache_implementation="static")`, or '
            '`model.generation_config.cache_implementation = "static"`), keep max_new_tokens '
            "the same between calls, and compile the model's forward rather than generate(). "
            "Or compile with dynamic=True, so the length is dynamic from the first compile."
        )
    if g.cause in ("shape", "float", "int"):
        return (
            head + f"{subject} is a value of {own}, not one you pass, so it can't be "
            "marked. Compile with dynamic=True (sizes start dynamic), or let torch make it "
            "dynamic on this recompile (automatic dynamic: one more compile of this frame)."
        )
    if g.cause == "object":
        return (
            head + f"{package} passes it a new object each time, so each call compiles "
            "again until the recompile limit, then runs in eager mode. Compile the module "
            f"{package} runs (the model's forward) rather than the {package} call around it, or "
            f"leave that call uncompiled (`torch.compiler.disable`)."
        )
    return (
        head + f"{g.words}. These are values {package} passes itself, so each kind of call "
        "gets its own graph (one compile each). Nothing in your code changes it; it costs "
        "compile time, and past the recompile limit the frame runs in eager mode. To avoid "
        f"it, leave the {package} call uncompiled (`torch.compiler.disable`)."
    )


def guard_subject(g: Guard) -> str:
    """What the failed guard is about, as the words name it: `boxes` of `boxes dim 0 ...`."""
    return f"`{guard_head(g.words)}`"


def collect_limit_hits(h: History, recompiles: list[Recompile]) -> list[LimitHit]:
    hits = []
    for e in h:
        reason = e.metrics.fail_reason
        if not RECOMPILE_LIMIT.search(reason):
            continue
        limit = RECOMPILE_LIMIT_VALUE.search(reason)
        frame = {k.compile_id for k in h.frame_of(e)}
        same = [r for r in recompiles if r.compile_id in frame]
        hits.append(
            LimitHit(
                frame=frame_name(e.code.name),
                file=e.code.file,
                line=e.code.line,
                limit=int(limit.group(1)) if limit else 0,
                compiles=len([r for r in same if r.compile_id != e.compile_id]) + 1,
                distinct_reasons=_distinct(r.failed_guard for r in same),
                compile_id=e.compile_id,
            )
        )
    return hits


def _distinct(reasons: Iterable[str]) -> list[str]:
    """One line per kind of reason: `x == 0`, `x == 1`, ... are one reason seen N times."""
    groups: dict[str, list[str]] = {}
    for r in reasons:
        groups.setdefault(guard_pattern(r), []).append(r)
    return [
        g[0] if len(g) == 1 else f"{g[0]} (and {len(g) - 1} more like it)" for g in groups.values()
    ]


def guard_head(words: str) -> str:
    """What a failed guard's words are about: `input_ids` of `input_ids dim 1 changed ...`,
    `self.config.problem_type` of `self.config.problem_type is None`."""
    return words.split(" ", 1)[0].strip("`")


def changed_subjects(r: Recompile) -> list[str]:
    """What the recompiling call changed, without values: the failed guard's subject and
    each of `also_changed`'s."""
    also = [m[1] for a in r.also_changed if (m := re.match(r"`([^`]+)`", a))]
    return [guard_head(r.failed_guard), *also]
