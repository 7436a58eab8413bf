"""A failed guard in words: what changed, compilediag's cause, and the advice that
removes the recompile. One row per kind of guard torch writes, tried in order; the
`Guard` record that carries the words; a value that crossed a graph break (`___stack0`)
named as the user wrote it."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from compilediag.analysis.source import code_at
from compilediag.report.vocabulary import RecompileCause
from compilediag.trace.formats import (
    AUTOGRAD_KEY,
    GLOBAL_STATE_MODE,
    GUARD_BOOL,
    GUARD_CONSTANT,
    GUARD_DISPATCH_KEYS,
    GUARD_EMPTY,
    GUARD_FREED,
    GUARD_GLOBAL_STATE,
    GUARD_LEN,
    GUARD_LOWER_BOUND,
    GUARD_OBJ_ID,
    GUARD_RANGE,
    GUARD_SIZE,
    GUARD_SIZE_CONDITION,
    GUARD_STRIDE,
    GUARD_STRING,
    GUARD_TENSOR_META,
    GUARD_TRAINING,
    GUARD_TYPE_ID,
    RESUME,
    sizes_in_words,
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
    # every site of the user's the guard's text names, torch's shortened paths (a guard of
    # two bounds names two: a library's line may come first)
    sites: list[tuple[str, int]] = field(default_factory=list)
    # every site its text names, a library's and torch's own too (`nn/modules/conv.py:560`)
    named: list[tuple[str, int]] = field(default_factory=list)


# what changed, the cause, the advice
Words = tuple[str, RecompileCause, str]

STRIDE_ADVICE = (
    "`{name}` arrives with another memory layout than the graph's: a slice of a longer "
    "tensor (`x[:, -n:]`) or a transpose keeps the longer tensor's strides. Give it one "
    "layout every call: `.clone(memory_format=torch.contiguous_format)` where it is made "
    "(`.contiguous()` does not copy a view torch already counts as contiguous, such as one "
    "row)."
)
MODE_ADVICE = (
    "Expected: one graph per mode (grad on or off, train() or eval(), autocast, inference "
    "mode). Each mode compiles once and later calls reuse its graph, so switching back and "
    "forth costs one compile per mode. To compile fewer, run the rarer mode uncompiled: call "
    "the module you passed to torch.compile there, or wrap those calls in "
    '`with torch.compiler.set_stance("force_eager"):`.'
)
OTHER_ADVICE = "See the guard above; TORCH_LOGS=recompiles_verbose shows every guard."


OR_DYNAMIC_TRUE = "; or compile with dynamic=True."


def sizes_0_1(name: str, dim: str) -> str:
    """Why a dynamic dim still recompiles for a size of 0 or 1, and what to keep it at."""
    return (
        " Sizes 0 and 1 are always specialised (broadcasting differs), so a dynamic dim "
        f"still recompiles for them: keep {name} dim {dim} at 2 or more (no batch of 1, no "
        "one-token prompt), or pad."
    )


def size_words(m: re.Match[str]) -> Words:
    name, dim, a, b = source_name(m["n"]), m["i"], int(m["a"]), int(m["b"])
    advice = (
        f"Mark it dynamic before the first call: torch._dynamo.mark_dynamic({name}, {dim})"
        + OR_DYNAMIC_TRUE
    )
    if {a, b} & {0, 1}:
        advice += sizes_0_1(name, dim)
    return f"{name} dim {dim} changed {a} → {b}", RecompileCause.SHAPE, advice


def lower_bound_words(m: re.Match[str]) -> Words:
    name = source_name(m["src"])
    return (
        f"{name} dim {m['i']} fell below {m['lo']}",
        RecompileCause.SHAPE,
        f"The graph made {name} dim {m['i']} dynamic for sizes >= 2; sizes 0 and 1 are always "
        "specialised (broadcasting differs), so they compile their own graph. Avoid them "
        "(e.g. pad a batch of 1), or accept one extra compile.",
    )


def range_words(m: re.Match[str]) -> Words:
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


def size_condition_words(m: re.Match[str]) -> Words:
    name, dim = source_name(m["src"]), m["i"]
    # every dim of the tensor in words (a look read `x dim 3` beside `x.size()[2]`)
    said = sizes_in_words(m.string.strip())
    return (
        f"{name} dim {dim} no longer meets `{said}`, a condition its dynamic graph holds",
        RecompileCause.BOUNDED,  # already dynamic: mark_dynamic, dynamic=True cannot help
        f"A condition on {name} dim {dim} in the code (where the guard was installed) split "
        "the dynamic graph: a size on its other side compiles another graph. Expected where "
        "the code must branch on the size; otherwise compute both sides as tensors "
        "(torch.where) or move the branch out of the compiled code.",
    )


def stride_words(m: re.Match[str]) -> Words:
    # a dynamic graph's layout: `idx.stride()[0] == idx.size()[1]` (contiguous rows)
    name = source_name(m["n"])
    return (
        f"{name} stride {m['i']} is no longer {source_name(m['v'])}",
        RecompileCause.TENSOR_META,
        STRIDE_ADVICE.format(name=name),
    )


def detach_words(shown: str, arg: str, at: str) -> str:
    """An input that requires grad in some calls and not in others, and `.detach()` `at`
    the call that passes it (`shown`: how the input is named)."""
    return (
        f"{shown} requires grad in some calls and not in others (an output of ops run with "
        "grad on, or a leaf set to require it): torch compiles a graph for each. Where no "
        f"gradient needs to flow back into it, pass `{arg}.detach()` {at}: the call then "
        "matches the graph made for an input that does not require grad."
    )


def tensor_meta_words(m: re.Match[str]) -> Words:
    what = {"dispatch key set": "device or dispatch keys"}.get(m["what"], m["what"])
    detail = f" ({m['rest'].strip()})" if m["rest"].strip() else ""
    if mode_switch(m.string):
        advice = MODE_ADVICE
    elif m["what"] == "stride":
        advice = STRIDE_ADVICE.format(name=source_name(m["n"]))
    elif m["what"] == "requires_grad":  # (a look's forward-forward: "convert the input")
        name = source_name(m["n"])
        advice = detach_words(name, name, "at the call")
    else:
        advice = (
            f"Call the compiled model with the same {what} every time, or convert the input first."
        )
    return f"{source_name(m['n'])} {what} changed{detail}", RecompileCause.TENSOR_META, advice


def global_state_words(m: re.Match[str]) -> Words:
    what = m["what"].strip().replace("grad_mode", "grad mode")
    return (
        f"global state changed: {what}",
        RecompileCause.GLOBAL,
        MODE_ADVICE
        if mode_switch(m.string)
        else f"A torch setting changed between calls ({what}): set it once before the "
        "first call (the same default dtype, number of threads, deterministic algorithms "
        "for every call), or accept one graph per setting.",
    )


def training_words(m: re.Match[str]) -> Words:
    return (
        f"module attribute `{source_name(m['src'])}.training` changed (was {m['v']})",
        RecompileCause.TRAINING,
        MODE_ADVICE,
    )


def object_words(m: re.Match[str]) -> Words:
    return (
        f"a different object for `{source_name(m['src'])}`",
        RecompileCause.OBJECT,
        "An object the code reads was replaced between calls (a new module, function or "
        "config object): create it once and reuse it.",
    )


def freed_words(m: re.Match[str]) -> Words:
    return (
        f"`{source_name(m['src'])}` was freed, so the graph that guarded it was dropped",
        RecompileCause.OBJECT,
        "The compiled code read an object that was freed after the call (one made anew "
        "each call): create it once and keep it alive, so its graph is reused.",
    )


def type_words(m: re.Match[str]) -> Words:
    return (
        f"`{source_name(m['src'])}` has a different type",
        RecompileCause.TYPE,
        "Pass the same Python type every call (e.g. always a tensor, never None or a list).",
    )


def length_words(m: re.Match[str]) -> Words:
    was = m["n"] if "n" in m.groupdict() else "0"  # (`not x`: it was empty)
    return (
        f"length of `{source_name(m['src'])}` changed (was {was})",
        RecompileCause.LENGTH,
        "Keep the container the same length, or stack it into one tensor and mark that "
        "tensor's dim 0 dynamic before the first call (`torch._dynamo.mark_dynamic(t, 0)`): "
        "stacked alone, its length is a size, and the next length recompiles once.",
    )


def string_words(m: re.Match[str]) -> Words:
    src = source_name(m["src"].strip())
    return (
        f"{src} changed (was {m['v']}): a Python string is baked into the graph",
        RecompileCause.STRING,
        f"Each value of `{src}` compiles its own graph once; a value seen before reuses "
        "its graph, so a few values cost a few compiles. Where it takes many, choose what "
        f"it selects before the compiled call (a compiled function for each value of "
        f"`{src}`), so the compiled code no longer reads the string.",
    )


def bool_words(m: re.Match[str]) -> Words:
    src = source_name(m["src"].strip())
    return (
        f"{src} changed (was {m['v']}): a Python bool is baked into the graph",
        RecompileCause.BOOL,
        f"Expected: each value of `{src}` compiles its own graph once, two at most, and "
        "later calls reuse them (dynamic=True does not change it: a bool is never "
        f"dynamic). Where it picks between two results, one graph takes `{src}` as a 0-d "
        "bool tensor and picks with torch.where(flag, a, b), computing both.",
    )


def float_said(value: str) -> str:
    """A guarded float as words: as torch wrote it where 6 significant figures hold it, else
    those 6 and an ellipsis ("2.41455…" for torch's 2.4145517349243164)."""
    try:
        x = float(value)
    except ValueError:
        return value
    return value if x != x or float(f"{x:.6g}") == x else f"{x:.6g}…"  # (nan is nan)


def constant_words(m: re.Match[str]) -> Words:
    src, value = source_name(m["src"].strip()), m["v"]
    if "." in value or "e" in value:
        return (
            f"{src} changed (was {float_said(value)}): a Python float is baked into the graph",
            RecompileCause.FLOAT,
            f"Pass `{src}` as a tensor (torch.tensor({value})), or compile with dynamic=True.",
        )
    advice = f"Make `{src}` a tensor or compile with dynamic=True"
    if src.startswith("self."):  # (the setting is of modules' attributes: none for an argument)
        advice += (
            "; an int attribute of an nn.Module stays static unless "
            "torch._dynamo.config.allow_unspec_int_on_nn_module = True"
        )
    return (
        f"{src} changed (was {value}): a Python int is baked into the graph",
        RecompileCause.INT,
        advice + ".",
    )


# torch's guard text -> its words: the first row that matches. The order matters where two
# patterns read the same text: a stride or a length guard (`len(x) == 3`) is also an
# equality with a number, which the last row takes for a baked-in int
GUARD_WORDS: list[tuple[re.Pattern[str], Callable[[re.Match[str]], Words]]] = [
    (GUARD_SIZE, size_words),
    (GUARD_LOWER_BOUND, lower_bound_words),
    (GUARD_RANGE, range_words),
    (GUARD_STRIDE, stride_words),
    (GUARD_TENSOR_META, tensor_meta_words),
    (GUARD_GLOBAL_STATE, global_state_words),
    (GUARD_TRAINING, training_words),
    (GUARD_BOOL, bool_words),
    (GUARD_OBJ_ID, object_words),
    (GUARD_FREED, freed_words),
    (GUARD_TYPE_ID, type_words),
    (GUARD_LEN, length_words),
    (GUARD_EMPTY, length_words),
    (GUARD_STRING, string_words),
    (GUARD_SIZE_CONDITION, size_condition_words),
    (GUARD_CONSTANT, constant_words),
]


def translate(guard: str) -> Words:
    """A failed guard in words, its cause, and the advice that removes the recompile."""
    for pattern, words in GUARD_WORDS:
        if m := pattern.match(guard):
            return words(m)
    return guard, RecompileCause.OTHER, OTHER_ADVICE


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


def guard_head(words: str) -> str:
    """What a failed guard's words are about: `input_ids` of `input_ids dim 1 changed ...`,
    `self.config.problem_type` of `self.config.problem_type is None`."""
    if words.startswith(UNNAMED):
        return UNNAMED
    return words.split(" ", 1)[0].strip("`")


STACK_VALUE = re.compile(r"`?___stack(\d+)`?")
# the same with what follows it (`___stack0[0]['boxes']`), where the line is not found
STACK_ITEM = re.compile(r"`?___stack\d+((?:\[[^\]]*\])*)`?")
UNNAMED = "the value the line before the break made"


def unnamed_stack(text: str) -> str:
    """`___stack0[0]` where its line can't be read (a library's file not installed here):
    said as what it is, never by torch's internal name."""
    return STACK_ITEM.sub(lambda m: f"{UNNAMED}" + (f" (its item {m[1]})" if m[1] else ""), text)


# where a Python number's new values recompile: said by recompiles.values_count, from the
# run's own recompiles of that frame (torch's automatic dynamic stops them after the first)
# the backends that carry a model input's mark_dynamic through a graph break, so that the
# frame after it takes the marked dim as dynamic from its first compile, by torch's own count
# of the frames it compiled (torch 2.13: aot_eager 2 frames, Inductor and eager 3; checked on
# the torch at hand by tests/analysis/recompiles/test_mark_after_break.py)
MARK_REACHES = ("aot_eager",)


def mark_after_break(what: str, them: str) -> str:
    """Whether marking `what` dynamic reaches the frame after a graph break, in words."""
    return (
        f"marking {what} reaches {them} only under some backends (by torch's own count: "
        f"{', '.join(MARK_REACHES)}, not Inductor or eager)"
    )


NEW_VALUES = "{new values}"
TO_PYTHON = re.compile(r"\.(item|tolist)\(\)|\b(float|int|bool)\(")


def stack_value(co_name: str, co_file: str) -> tuple[str, int, str] | None:
    """The value a resume frame's breaking line made (`___stack0`), as the user wrote it:
    (`scale` (line 12: `float(h.norm())`), its line, the expression); None outside a
    resume frame or where the line is not found."""
    resume = RESUME.match(co_name)
    if not resume:
        return None
    line = int(resume["line"])
    code = without_comment(code_at(co_file, line)).strip()
    assigned = re.match(r"(\w+)\s*=(?!=)\s*(.+)", code)
    expr = assigned[2] if assigned else code
    if not expr:
        return None
    made, whole = first_conversion(expr)
    if made and not whole:  # the value is the conversion's, made before the rest of the line
        return f"`{made}` (line {line})", line, expr
    name = f"`{assigned[1]}` (line {line}: `{expr}`)" if assigned else f"`{expr}` (line {line})"
    return name, line, expr


def without_comment(code: str) -> str:
    """A line of code without its comment (`n = int(x.item())  # a break` -> the code)."""
    import io
    import tokenize

    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            if tok.type == tokenize.COMMENT:
                return code[: tok.start[1]].rstrip()
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return code


def first_conversion(expr: str) -> tuple[str, bool]:
    """The tensor-to-Python conversion of `expr` that runs first (`.item()`, `.tolist()`,
    `float(…)`, `int(…)`, `bool(…)`: the innermost, leftmost), whose value is the one that
    crosses the graph break; and whether it is the whole expression. `int(h.max().item() *
    10)` -> ('h.max().item()', False): torch breaks at `.item()` and its float is the value
    the next frame guards, not the int (a look read "`n` changed (was 1.24…)" where n was
    12). ('', False) where there is none or the expression does not parse."""
    import ast

    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError:
        return "", False

    def converts(node: ast.AST) -> bool:
        if not isinstance(node, ast.Call):
            return False
        f = node.func
        if isinstance(f, ast.Attribute):
            return f.attr in ("item", "tolist") and not node.args
        return isinstance(f, ast.Name) and f.id in ("float", "int", "bool") and len(node.args) == 1

    def innermost(node: ast.AST) -> ast.AST | None:
        for child in ast.iter_child_nodes(node):
            if (found := innermost(child)) is not None:
                return found
        return node if converts(node) else None

    found = innermost(tree.body)
    return (ast.unparse(found), found is tree.body) if found is not None else ("", False)


BRANCHES = re.compile(r"^\s*(?:if|elif|while|assert)\b|\bif\b.*\belse\b")


def name_stack_values(g: Guard, co_name: str, co_file: str) -> Guard:
    """After a graph break the rest of the function runs as a frame of its own, and the
    value the breaking line made reaches it as `___stack0`: name it as the user wrote it,
    the variable the line assigns (`scale`) or the expression, with the line."""
    if not STACK_VALUE.search(g.words):
        return g
    named = stack_value(co_name, co_file)
    if named is None:
        g.words, g.suggestion = unnamed_stack(g.words), unnamed_stack(g.suggestion)
        return g
    name, line, expr = named
    g.words = STACK_VALUE.sub(name, g.words, count=1)
    if g.cause in (RecompileCause.FLOAT, RecompileCause.INT) and (made := TO_PYTHON.findall(expr)):
        # every conversion of the line: dropping one leaves the others to make a number
        call = "` and `".join(
            f".{attr}()" if attr else f"{fn}(…)" for attr, fn in dict.fromkeys(made)
        )
        head = (
            f"Line {line} turns a tensor into a Python number (`{call}`), which torch guards "
            f"on{NEW_VALUES}: "
        )
        g.suggestion = head + (
            # (an eighteenth look: "which also keeps the graph whole" at an `if` on it,
            # where torch's break stayed, data-dependent branching)
            "it decides a branch, so keep the comparison a tensor and pick the results with "
            "torch.where (or torch.cond); with capture_scalar_outputs alone torch still "
            "breaks at the branch (data-dependent branching)."
            if BRANCHES.search(expr)
            else f"keep it a 0-d tensor (drop `{call}`), or set "
            "torch._dynamo.config.capture_scalar_outputs = True, which also keeps the graph "
            f"whole at line {line}."
        )
    else:
        g.suggestion = STACK_VALUE.sub(name, g.suggestion)
    return g
