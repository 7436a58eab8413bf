"""The advice for one recompile: advisors asked in order, the first answer wins. The most
specific cause comes first (the model sets the guarded value itself, a mode switch, the
loader's last batch, a library's own frame, a framework's training loop, state forward
changes); then what
torch did about the value (baked it in, made it dynamic); last, the advice for the guard
itself (a local after a graph break, every dim that changes, the user's call that passed
the tensor, and the words `translate` gave it). Whose input a value is comes from
`Entry.caller`, decided once on the whole stack."""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from compilediag.analysis.history import Entry, History
from compilediag.analysis.recompiles.guard_words import (
    NEW_VALUES,
    OR_DYNAMIC_TRUE,
    STACK_VALUE,
    Guard,
    mark_after_break,
    sizes_0_1,
    stack_value,
)
from compilediag.analysis.recompiles.guards import (
    is_mode_switch,
    specialised,
)
from compilediag.analysis.recompiles.library_advice import (
    inner_library_frame,
    library_recompile_advice,
    size_advice,
    under_training_loop,
)
from compilediag.analysis.recompiles.mode_advice import compiled_in_place, mode_advice, mode_graph
from compilediag.analysis.recompiles.nearest import other_module
from compilediag.analysis.recompiles.passed_inputs import (
    POSITIONAL,
    SPREAD_ITEM,
    argument_at,
    detach_at_call,
    last_batch,
    markable,
    where,
    where_guards_hold,
)
from compilediag.analysis.recompiles.state_advice import mutation_advice, state_advice
from compilediag.analysis.recompiles.torch_bounds import frame_bounded, or_dynamic_true, torch_bound
from compilediag.analysis.source import assignments_in_function, code_at
from compilediag.paths import Owner
from compilediag.report.vocabulary import RecompileCause
from compilediag.trace.compiles import Specialized
from compilediag.trace.formats import (
    GUARD_SIZE,
    RESUME,
    is_resume_frame,
    source_name,
)


@dataclass
class Case:
    """One recompile, as the advisors read it."""

    history: History
    entry: Entry
    guard: Guard  # the failed guard that says why (`guards.deciding_guard`)
    guards: list[Guard]  # one per cached graph
    dims: list[tuple[str, str]]  # every size guard that failed in the frame: (input, dim)
    baked_in: bool  # a float torch tried to make dynamic and then baked in
    dynamic: bool  # the new graph is dynamic: later values reuse it
    # the backend made the changed size a constant again in the new graph (its dims, by
    # torch's record): the input's dims it pinned, and what needed them
    pinned: list[Specialized] = field(default_factory=list)
    # the function of torch's API that took the changed number as a number (its record)
    needs: str = ""


Advisor = Callable[[Case], str]  # the advice, or '' where it has none


def advise(case: Case) -> str:
    """The recompile's advice: the first answer of `ADVISORS`, most specific first."""
    return first_answer(ADVISORS, case)


def first_answer(advisors: list[Advisor], case: Case) -> str:
    return next((said for advisor in advisors if (said := advisor(case))), "")


# --- what the call around the guard says ---------------------------------------------------


def model_sets_it(c: Case) -> str:
    return mutation_advice(c.guard, c.entry.code, c.entry.compile.guards)


def one_graph_per_mode(c: Case) -> str:
    return mode_advice(c.history, c.entry) if is_mode_switch(c.guards) else ""


def blocks_in_a_loop(c: Case) -> str:
    """requires_grad, in a module compiled in place (`block.compile()` for each block) that
    one line calls for every block: each block's input from that line, and the first one's
    (a batch) needs no grad where the others' (activations) do. A graph for each, shared by
    every block: nothing to change."""
    if "requires_grad" not in c.guard.guard or not compiled_in_place(c.entry):
        return ""
    first = c.history.frame_of(c.entry)[0]
    a, b = mode_graph(first).call, mode_graph(c.entry).call
    if a is None or b is None or (a.file, a.line) != (b.file, b.line):
        return ""
    code = code_at(a.file, a.line).strip()
    return (
        f"Expected: {os.path.basename(a.file)}:{a.line}"
        + (f" (`{code}`)" if code else "")
        + " calls modules compiled in place whose inputs differ in requires_grad (as the "
        "first block's input, a batch, and the later blocks' activations do). Torch compiles "
        "one graph for each and every such module reuses them (graphs are cached on the code "
        "object, shared by the blocks): nothing to change."
    )


def another_module(c: Case) -> str:
    return other_module(c.history, c.entry)


def library_frame(c: Case) -> str:
    package = inner_library_frame(c.entry)
    return library_recompile_advice(package, c.guard, c.entry, c.dynamic) if package else ""


def loaders_last_batch(c: Case) -> str:
    return last_batch(c.history, c.entry, c.guard, c.dynamic)


def training_loop_batches(c: Case) -> str:
    if c.guard.cause in (RecompileCause.SHAPE, RecompileCause.BOUNDED) and under_training_loop(
        c.entry
    ):
        return size_advice(c.guard, c.dynamic, c.entry.caller.loop)
    return ""


def python_state(c: Case) -> str:
    return state_advice(c.guard, c.entry.code.name, code_at(c.guard.file, c.guard.line))


# --- what torch did about the value --------------------------------------------------------


# a value that is a clock's reading: new at every call
CLOCK = re.compile(r"\b(?:perf_counter|monotonic|process_time|time)(?:_ns)?\(\)|\bnow\(")


def clock_reading(c: Case) -> str:
    """A number that changed at every call because it is a clock's reading (`t0 =
    time.perf_counter()` in a timing decorator, the code after its break compiled with
    it): no tensor or dynamic setting is the fix; the timing out of the compiled code is
    (an eleventh look was told to pass it as torch.tensor(14170.674946891))."""
    if c.guard.cause not in (RecompileCause.FLOAT, RecompileCause.INT):
        return ""
    named = re.match(r"`?([\w.]+)", c.guard.words)  # (`t0` (line 10: ...) of a stack value)
    if named is None:
        return ""
    name = named[1]
    file, line = c.entry.place
    found = [(n, v) for n, v in assignments_in_function(file, line, name) if CLOCK.search(v)]
    if not found:
        return ""
    at, value = found[0]
    return (
        f"`{name}` is a clock's reading (line {at}: `{name} = {value}`), new at every call, "
        f"which torch guards on{NEW_VALUES}: time outside the compiled function (around your "
        "call of the compiled model), not inside it; that also removes the graph break the "
        "clock's call makes."
    )


def torch_takes_a_number(c: Case) -> str:
    """A float or int that a function of torch's API takes as a number (torch's record of
    it made a constant names the function): a look's `F.max_pool1d` kernel size and
    `F.cross_entropy` label_smoothing, where a tensor broke the graph or guarded on its
    value, and dynamic=True compiled a graph for each value all the same."""
    if not c.needs:
        return ""
    what = c.guard.words.split(" changed", 1)[0]
    return (
        f"torch's `{c.needs}` takes {what} as a Python number, so each value is baked into "
        f"the graph{NEW_VALUES}. A tensor is no fix there (a graph break, or a guard on its "
        "value), nor is dynamic=True: pass few values (each compiles once, up to the "
        f"recompile limit), or call `{c.needs}` outside the compiled code."
    )


def torch_bounds(c: Case) -> str:
    return torch_bound(c.guard)


def bounded_by_torch(c: Case) -> str:
    return frame_bounded(c.guard, c.history, c.entry)


def float_baked_in(c: Case) -> str:
    if c.guard.cause != RecompileCause.FLOAT or not c.baked_in:
        return ""
    # what new values did is this run's count (recompiles.values_count), never a prediction
    return (
        "torch tried to make it dynamic, but an op in the graph needs it as a Python "
        f"number: torch restarted that compile and baked the value in{NEW_VALUES}. "
        + c.guard.suggestion.replace(NEW_VALUES, "")
    )


def backend_needs_number(c: Case) -> str:
    """Torch made the size dynamic, and the backend made it a constant again while it
    compiled the graph (an Inductor lowering that needs it as a number): each size is a graph
    of its own, and neither mark_dynamic (torch raises on a marked dim the compile makes a
    constant) nor dynamic=True keeps one."""
    if not c.pinned:
        return ""
    first = c.pinned[0]
    subject = c.guard.words.split(" changed", 1)[0]
    dims = sorted({d for s in c.pinned for d in pinned_dims(s)})
    more = [d for d in dims if f"dim {d}" not in subject]
    also = f" (and dim{'s' if len(more) > 1 else ''} {', '.join(more)})" if more else ""
    why = f" (its lowering of {first.op})" if first.op else ""
    return (
        f"{first.by} needs {subject}{also} as a number{why}: torch made the size dynamic, "
        f"and {first.by} compiled a graph for one size alone, so each new size compiles "
        "one of its own, up to the recompile limit. Marking it dynamic does not help: "
        "mark_dynamic raises (torch refuses a marked dim the compile makes a constant), and "
        "dynamic=True compiles as many graphs. Pass few sizes: resize or pad the inputs to a "
        "few sizes, and call the model once with each before the work you time or serve."
    )


def pinned_dims(s: Specialized) -> list[str]:
    return [m[1] for src in s.sources if (m := PINNED_DIM.search(src))]


PINNED_DIM = re.compile(r"\.size\(\)\[(\d+)\]$")


def already_dynamic(c: Case) -> str:
    """torch's automatic dynamic made the new graph dynamic: the guard's own advice only
    saves this one recompile."""
    if c.guard.cause not in ("shape", "float", "int") or not c.dynamic:
        return ""
    said = from_size_one(c) or bounded_by_torch(c)
    if not said:
        said = first_answer(GUARD_ADVISORS, c)
        said = "To skip this recompile too: " + said[:1].lower() + said[1:]
    return (
        "torch already made it dynamic on this recompile (automatic dynamic), so later "
        f"values reuse this graph{where_guards_hold(c.history, c.entry, c.guard)}. {said}"
    )  # fmt: skip


# --- the advice for the guard itself -------------------------------------------------------


def local_after_break(c: Case) -> str:
    # the code after a graph break runs as its own function whose inputs are forward's
    # locals: the user can't mark those
    resumed = RESUME.match(c.entry.code.name or "")
    if c.guard.cause != "shape" or not resumed:
        return ""
    fn = resumed["fn"]  # the function the break was in (a helper of forward's too)
    if STACK_VALUE.search(c.guard.guard):  # what the breaking call returned, made eagerly
        made = stack_value(c.entry.code.name, c.entry.code.file)
        call = f" (line {made[1]}: `{made[2]}`)" if made else ""
        return (
            f"The changed tensor is what the call that broke the graph returned{call}: that "
            "call runs in eager mode, between the graphs, so no mark_dynamic on the model "
            "input reaches it, under any backend. Compile with dynamic=True (this frame is "
            f"then dynamic from its first compile), or remove the graph break at line "
            f"{resumed['line']} (explain shows it), which removes this frame."
        )
    return (
        f"The changed tensor is a local of {fn} here (after a graph break, the rest "
        f"of {fn} runs as its own function, with {fn}'s locals as inputs), so it "
        f"can't be marked; {mark_after_break('the model input it is computed from', 'it')}. "
        f"Removing the graph break at line {resumed['line']} (explain shows it) removes this "
        "frame."
    )


def from_size_one(c: Case) -> str:
    """A size that changed from 0 or 1: the graph before was specialised to it whatever was
    marked dynamic (dynamic=True too), so no mark skips this recompile (a look's sweep from
    a batch of 1 was advised marks that left it: torch's count, 2 graphs either way)."""
    m = GUARD_SIZE.match(c.guard.guard)
    if c.guard.cause != RecompileCause.SHAPE or not m or int(m["a"]) not in (0, 1):
        return ""
    if any(dynamic_would_serve(g) for g in c.guards):
        return ""  # (a look's sweep 16 → 1 → 8: under dynamic=True the 16's graph took the 8)
    name, dim, size = source_name(m["n"]), m["i"], m["a"]
    return (
        f"This recompile stays whatever is marked dynamic, dynamic=True too: torch always "
        f"specialises a size of {size} (broadcasting differs), so the graph before served "
        f"{name} dim {dim} at {size} alone. To skip it, start at 2 or more (no batch of 1 "
        f"first) with the dim marked dynamic before that first call "
        f"(`torch._dynamo.mark_dynamic({name}, {dim})`: unmarked, the next size recompiles "
        "once instead), or pad; or accept this one compile."
    )


def dynamic_would_serve(g: Guard) -> bool:
    """A cached graph that failed on a size of 2 or more going to another (16 → 8): were
    that size dynamic (dynamic=True, a mark), the graph would serve the call."""
    m = GUARD_SIZE.match(g.guard)
    return g.cause == RecompileCause.SHAPE and m is not None and min(int(m["a"]), int(m["b"])) >= 2


def size_one(c: Case) -> str:
    """A size that changed to 0 or 1 (or fell below a dynamic dim's 2), or from it: torch
    specialises those whatever is marked dynamic, dynamic=True too (a look's batch of 1
    was advised marks that left its recompile)."""
    if said := from_size_one(c):
        return said
    m = GUARD_SIZE.match(c.guard.guard)
    if c.guard.cause != RecompileCause.SHAPE or not specialised([c.guard]):
        return ""
    if not m:  # a lower bound: its own words say it
        return c.guard.suggestion
    name, dim, size = source_name(m["n"]), m["i"], m["b"]
    return (
        f"A size of {size} is always specialised (broadcasting differs), so a call with "
        f"{name} dim {dim} at {size} compiles a graph of its own whatever is marked dynamic, "
        f"dynamic=True too: keep {name} dim {dim} at 2 or more (no batch of 1, no one-token "
        "prompt), or pad; or accept this one compile."
    )


def every_dim(c: Case) -> str:
    # one piece of advice that covers every dim that changes (batch, sequence length, ...)
    if c.guard.cause != "shape" or len(c.dims) <= 1 or is_resume_frame(c.entry.code.name):
        return ""
    marks = "; ".join(f"torch._dynamo.mark_dynamic({n}, {d})" for n, d in c.dims)
    return (
        f"{len(c.dims)} dims of this frame's inputs change across calls: mark each "
        f"dynamic before the first call: {marks}" + or_dynamic_true(c.guard, c.entry)
    )


CONTROL_FLOW = re.compile(r"^\s*(?:for|while|if|elif)\b|\brange\(")


def int_sets_control_flow(c: Case) -> str:
    """An int the guard's line uses to decide Python control flow (a loop's count, a
    branch): torch unrolls or picks the code by its value, so it stays a Python int, and
    neither a tensor nor dynamic=True keeps one graph."""
    if c.guard.cause != RecompileCause.INT or not c.guard.file:
        return ""
    code = code_at(c.guard.file, c.guard.line).strip()
    name = c.guard.words.split(" changed", 1)[0].strip("`")
    if not CONTROL_FLOW.search(code) or not re.search(rf"\b{re.escape(name)}\b", code):
        return ""
    return (
        f"`{name}` sets Python control flow at {os.path.basename(c.guard.file)}:{c.guard.line} "
        f"(`{code}`): torch traces the code its value picks, so each value is a graph of its "
        "own. It has to stay a Python int: a tensor cannot set a Python loop's count or branch "
        "in a graph, and dynamic=True specialises it all the same. Pass few values (round "
        "it up to a bucket), or the same one each call: each value compiles once."
    )


def int_into_torch(c: Case) -> str:
    """An int the guard's line passes to a function of torch's (`torch.topk(h, k)`): a
    tensor there is no fix on aot_eager or Inductor (torch reads the number out of it, and
    that compile fails; the eager backend holds it), while dynamic=True makes it a symbolic
    int (a nineteenth look: topk's k as a tensor stopped forward compiling; dynamic=True,
    no recompile)."""
    if c.guard.cause != RecompileCause.INT or not c.guard.file:
        return ""
    code = code_at(c.guard.file, c.guard.line).strip()
    name = c.guard.words.split(" changed", 1)[0].strip("`")
    fn = torch_call_taking(code, name)
    if not fn:
        return ""
    return (
        f"Compile with dynamic=True, and `{name}` is a symbolic int of one graph. Keep it a "
        f"Python int: `{fn}` at {os.path.basename(c.guard.file)}:{c.guard.line} takes it as a "
        "number, and a tensor there is no fix on aot_eager or Inductor (torch reads the number "
        "out of it, and that compile fails)."
    )


def torch_call_taking(code: str, name: str) -> str:
    """The function of torch's (`torch.topk`, `F.pad`) a line passes `name` to, or ''."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return ""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        fn = ast.unparse(node.func)
        given = [*node.args, *(k.value for k in node.keywords)]
        if fn.split(".", 1)[0] in ("torch", "F") and any(
            isinstance(a, ast.Name) and a.id == name for a in given
        ):
            return fn
    return ""


def at_the_call(c: Case) -> str:
    if c.guard.cause != RecompileCause.SHAPE or len(c.dims) > 1:
        return ""
    return user_call(c.entry, c.guard)


def translated(c: Case) -> str:
    # the advice `translate` gave the guard's text (or torch's hint, for an int)
    return c.guard.suggestion.replace(OR_DYNAMIC_TRUE, or_dynamic_true(c.guard, c.entry))


GUARD_ADVISORS: list[Advisor] = [
    local_after_break, size_one, every_dim, int_sets_control_flow, int_into_torch, at_the_call,
    lambda c: detach_at_call(c.entry, c.guard), translated,
]  # fmt: skip
ADVISORS: list[Advisor] = [
    another_module,
    model_sets_it,
    one_graph_per_mode,
    blocks_in_a_loop,
    backend_needs_number,
    loaders_last_batch,
    library_frame,
    training_loop_batches,
    python_state,
    clock_reading,
    torch_takes_a_number,
    torch_bounds,
    float_baked_in,
    already_dynamic,
    *GUARD_ADVISORS,
]


def user_call(e: Entry, g: Guard) -> str:
    """A size guard on an input the user passes (`Entry.caller`: the user's line, or
    compilediag's worker with the inputs the user's file made): the advice at the user's
    call that passed it (`mark_dynamic(input, 0)` at the line that calls the model; a
    library's model called directly, `model(**batch)`, too, with padding to a few lengths
    for a sequence dim). '' where the call or the argument is not found for the user's own
    function (the guard's own words then say it)."""
    m = GUARD_SIZE.match(g.guard)
    caller = e.caller
    if not m or not caller.passes_inputs or is_resume_frame(e.code.name):
        return ""
    param, dim, a, b = source_name(m["n"]), m["i"], int(m["a"]), int(m["b"])
    library = e.code.owner == Owner.LIBRARY  # a library's model the user called directly
    positional = POSITIONAL.match(param)
    who = f"The model's argument {int(positional['i']) + 1}" if positional else f"`{param}`"
    site = caller.frame
    arg = argument_at(site, e, param) if site else ""
    spread = bool(SPREAD_ITEM.match(arg))  # `model(**batch)`: `batch["input_ids"]`
    if site and arg == param and markable(arg):
        text = (
            f"`{param}` is an input you pass at the call, {where(site)}: mark it dynamic "
            f"there, before the call: `torch._dynamo.mark_dynamic({arg}, {dim})`"
        )
    elif site and arg and markable(arg) and not spread:
        text = (
            f"{who} is `{arg}` at the call, {where(site)}: mark it dynamic there, before the "
            f"call: `torch._dynamo.mark_dynamic({arg}, {dim})`"
        )
    elif library and param.isidentifier():
        at = (
            f"at the call, {where(site)}" + (f" (`{arg}` there)" if spread else "")
            if site
            else "(your model file's get_inputs() or get_input_sets() makes it, or --shapes "
            "sizes it from get_inputs())"
        )
        arg = param
        text = (
            f"`{param}` is an input you pass {at}: mark its dim {dim} dynamic before the call, "
            f"where you make it: `torch._dynamo.mark_dynamic({param}, {dim})`"
        )
    else:
        return ""
    if library and dim == "1":  # a sequence's length, as a tokenizer pads it
        text += (
            "; or pad it to a few lengths (the tokenizer's or the collator's "
            "`pad_to_multiple_of=8`), so that few sizes compile"
        )
    elif library and dim != "0":  # an image's height or width (a look: tokenizer words there)
        text += "; or resize or pad it to a few sizes, so that few sizes compile"
    text += or_dynamic_true(g, e)
    if {a, b} & {0, 1}:
        text += sizes_0_1(arg, dim)
    return text
