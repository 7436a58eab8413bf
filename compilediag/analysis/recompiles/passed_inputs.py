"""A recompiling frame's input, where the user passes it: what the user's call passes for
it (`x` of `criterion(model(x), y)`, `batch["input_ids"]` of `model(**batch)`), and the
advice on a batch that came in smaller once - the loader's last, partial batch - for
whoever called the frame (the user's line, a framework's loop, the library)."""

from __future__ import annotations

import ast
import linecache
import os
import re

from compilediag.analysis.callers import PROBE_PATH, CalledBy, Caller, drop_last_code, shown
from compilediag.analysis.history import Entry, History
from compilediag.analysis.recompiles.guard_words import (
    Guard,
    detach_words,
    mark_after_break,
    sizes_0_1,
)
from compilediag.analysis.recompiles.guards import parse_guard, reasons_of, size_change
from compilediag.paths import is_library_file, possessive
from compilediag.trace.compiles import Frame, unranked
from compilediag.trace.formats import (
    GUARD_CID_PREFIX,
    GUARD_LOWER_BOUND,
    GUARD_SIZE,
    GUARD_TENSOR_META,
    RESUME,
    size_guards,
    sizes_in_words,
    source_name,
    splits_near,
)

# a positional input of a `*args` wrapper (torch's `inner`, a library's decorator)
POSITIONAL = re.compile(r"^args\[(?P<i>\d+)\]$")
# an item of a dict spread into the call's keywords: `batch["input_ids"]` of `model(**batch)`
SPREAD_ITEM = re.compile(r'^\w+\["\w+"\]$')
# what can be marked where it is passed: a name, an item or attribute of one
MARKABLE = re.compile(r"^[A-Za-z_][\w.]*(?:\[(?:'[^']*'|\"[^\"]*\"|\d+)\])*$")
# calls on the user's line that are not the model's: torch's functions, a tensor's methods
NOT_THE_MODEL = re.compile(
    r"^(?:torch|nn|F|np|numpy|math)\.|\.(?:to|cuda|cpu|float|half|bfloat16|long|int|view|"
    r"reshape|contiguous|clone|detach|unsqueeze|squeeze|permute|transpose|flatten|item|"
    r"numpy|sum|mean|backward|step|zero_grad|append|extend|get|items|keys|values)$"
)


def _parsed(path: str) -> ast.Module | None:
    if not path or path.startswith("<") and path != "<string>":
        return None
    try:
        return ast.parse("".join(linecache.getlines(path)))
    except (SyntaxError, ValueError):
        return None


def _compiled_names(tree: ast.Module) -> set[str]:
    """The names the file binds to what torch.compile returned (`compiled = torch.compile(
    model)`, `self.net = torch.compile(...)`): its last part."""
    names = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and ast.unparse(node.value.func).endswith("compile")
        ):
            for t in node.targets:
                names.add(ast.unparse(t).rsplit(".", 1)[-1])
    return names


def model_call(site: Frame) -> ast.Call | None:
    """The call on the user's line that called the compiled model: the one of a name bound
    to torch.compile's result, else the innermost call that is not torch's function or a
    tensor's method (`model(x)` of `criterion(model(x.to(dev)), y)`)."""
    tree = _parsed(site.file)
    if tree is None:
        return None
    calls = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and n.lineno <= site.line <= (n.end_lineno or n.lineno)
    ]
    names = _compiled_names(tree)
    named = [c for c in calls if ast.unparse(c.func).rsplit(".", 1)[-1] in names]
    if named:
        return named[-1]
    rest = [c for c in calls if not NOT_THE_MODEL.search(ast.unparse(c.func))]
    # the innermost: ast.walk goes outside in, and a nested call starts no earlier
    return max(rest, key=lambda c: (c.lineno, c.col_offset), default=None)


def _parameters(e: Entry) -> list[str]:
    """The positional parameters of the compiled frame's function, `self` left out."""
    tree = _parsed(e.code.file)
    fn = next(
        (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
         and n.lineno == e.code.line),
        None,
    ) if tree else None  # fmt: skip
    if fn is None:
        return []
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    return params[1:] if params and params[0] == "self" else params


def argument_at(site: Frame, e: Entry, param: str) -> str:
    """What the user's call at `site` passes for the frame's input `param` (its name in the
    guard: `x`, `args[0]` of a wrapper, `input_ids` of `**kwargs`), as written: `images`,
    `batch["input_ids"]` for `model(**batch)`; '' where it can't be told."""
    call = model_call(site)
    if call is None:
        return ""
    positional = POSITIONAL.match(param)
    index = int(positional["i"]) if positional else -1
    if not positional:
        for kw in call.keywords:
            if kw.arg == param:
                return ast.unparse(kw.value)
        params = _parameters(e)
        index = params.index(param) if param in params else -1
    if 0 <= index < len(call.args):
        if not any(isinstance(a, ast.Starred) for a in call.args[: index + 1]):
            return ast.unparse(call.args[index])
        return ""
    if not positional and param.isidentifier():
        spread = [kw.value for kw in call.keywords if kw.arg is None]
        if len(spread) == 1 and isinstance(spread[0], ast.Name):
            return f'{spread[0].id}["{param}"]'
    return ""


def markable(arg: str) -> bool:
    return bool(MARKABLE.match(arg))


def where(f: Frame) -> str:
    """The user's line as the advice names it: `train.py:12 (in validate)`; a script's own
    line by itself (not `(in <module>)`)."""
    into = f" (in {f.name})" if f.name and f.name != "<module>" else ""
    return f"{os.path.basename(f.file)}:{f.line}{into}"


# --- the loader's last batch -------------------------------------------------------------


def batch_sizes(h: History, e: Entry) -> set[int]:
    """Every size dim 0 of the frame's inputs had in its failed size guards, over all its
    recompiles: a loader's last batch gives two (the batch size and the smaller rest)."""
    sizes: set[int] = set()
    for k in h.frame_of(e):
        for r in reasons_of(k):
            m = GUARD_SIZE.match(parse_guard(r).guard)
            if m and m["i"] == "0":
                sizes |= {int(m["a"]), int(m["b"])}
    return sizes


def where_guards_hold(h: History, e: Entry, g: Guard) -> str:
    """Where the frame compiled again after this dynamic graph (a bound its guards keep: `if
    x.shape[0] > 6`), later values reuse it only within them: said, with those compiles;
    else the bounds its own guards keep on the size that changed (`3 <= x dim 0 <= 15`)."""
    frame = h.frame_of(e)
    later = [str(x.id) for x in frame[frame.index(e) + 1 :] if x.graph]
    if later:
        see = "them" if len(later) > 1 else "it"
        return f" where its guards hold ({', '.join(later)} compiled again: see {see})"
    change = size_change(g.guard)
    if change is None:
        return ""
    near = max(change.old, change.new)  # (not 32-bit indexing's bound: it splits none)
    kept = [
        said
        for text in size_guards(e.compile.guards)
        if splits_near(text, change.source, change.dim, near)
        and not GUARD_LOWER_BOUND.match(said := text.split("  #", 1)[0].strip())
    ]
    return f" where its guards hold (`{'`, `'.join(map(sizes_in_words, kept))}`)" if kept else ""


def last_batch(h: History, e: Entry, g: Guard, dynamic: bool) -> str:
    """A batch dim that changed once, from the batch size to a smaller one: the loader's
    last, partial batch (the data's size is not a multiple of the batch size), in the user's
    own loop or a framework's, where `DataLoader(..., drop_last=True)` removes it. '' for any
    other change, for compilediag's own sweep of input sets (their sizes are the user's
    choice), under generate(), and for a frame the library calls itself (its own values)."""
    m = GUARD_SIZE.match(g.guard)
    c = e.caller
    if not m or m["i"] != "0" or int(m["b"]) >= int(m["a"]):
        return ""
    if c.by == CalledBy.HARNESS or any("generate" in f.name for f in e.compile.stack):
        return ""
    if c.by == CalledBy.LIBRARY:
        return ""  # a library's own call: its own values (Faster R-CNN's boxes), not a batch
    a, b = int(m["a"]), int(m["b"])
    if batch_sizes(h, e) != {a, b}:
        return ""  # batches of several sizes: not one last batch
    if not _where_it_compiled_before(h, e, a):
        return ""  # other data, passed from another line: not the same loop's last batch
    resumed = RESUME.match(e.code.name or "")
    after_break = resumed is not None
    first = h.entries[0].code.name if h.entries else ""
    if resumed and resumed["fn"] != first:  # a helper's local after its break, not a batch
        return ""  # (a look: a nonzero's row count, 5 → 4, read as the loader's last batch)
    name = source_name(m["n"])
    batch = c.by != CalledBy.USER or _loads_batches(c)
    said = [
        f"A smaller batch ({a} → {b}) reached the model {_from(c)}: "
        if batch
        else f"Dim 0 came in smaller once ({a} → {b}) {_from(c)}: "
    ]
    arg = ""
    dim = _dim(batch)
    if c.by == CalledBy.FRAMEWORK:
        # (the Trainer builds the loader from the dataset it is given: no DataLoader of yours)
        trainer = c.framework == "the Trainer"
        loader = (
            "the DataLoader the Trainer builds from your dataset" if trainer
            else f"the DataLoader you give {c.framework}"
        )  # fmt: skip
        setting = f"`{drop_last_code(c.framework)}`"
        said.append(
            f"the last, partial batch of {loader}, most likely (the data's size is not a "
            "multiple of the batch size). "
            + (setting if trainer else f"`drop_last=True` on that loader ({setting})")
            + " removes the recompile; or compile with dynamic=True, so the batch dim is "
            "dynamic from the first compile."
        )
    else:
        own = c.by == CalledBy.USER and c.frame is not None and not after_break
        arg = argument_at(c.frame, e, name) if own and c.frame else ""
        said.append(_own_loop(batch, arg, name, first if after_break else ""))
    text = "".join(said)
    if dynamic:
        text += (
            f" torch made {dim} dynamic on this recompile "
            f"(automatic dynamic), so later sizes reuse this graph{where_guards_hold(h, e, g)}: "
            f"{_saves(after_break, 'batch' if batch else 'piece', c.by == CalledBy.FRAMEWORK)}."
        )
    if b in (0, 1):
        text += sizes_0_1(arg or name, "0")
    return text


def _own_loop(batch: bool, arg: str, name: str, resumed_from: str) -> str:
    """The last batch's (or piece's) advice in the user's own loop: drop or pad it, or mark
    the dim (`arg`, where the user's call passes it); `resumed_from`, the function whose
    break this frame resumes, where it is the code after one."""
    noun = "batch" if batch else "input"
    mark = (
        f"`torch._dynamo.mark_dynamic({arg}, 0)`"
        if arg and markable(arg)
        else f"`torch._dynamo.mark_dynamic({noun}, 0)` on the {noun} you pass"
    )
    # (no loader is known to make the batches: a look's job sliced its own, and read
    # "`drop_last=True` on that loader")
    drop = (
        "the last, partial batch, most likely (the data's size is not a multiple of the "
        "batch size). Dropping or padding that last batch removes the recompile (where a "
        "DataLoader makes the batches, `DataLoader(..., drop_last=True)` drops it)"
        if batch
        else "the data's last, partial piece, most likely (its length is not a multiple of "
        "the size it is cut in: a batch, or a chunk along a sequence). Dropping or padding "
        "that last piece removes the recompile"
    )
    if resumed_from:
        return (
            f"{drop}. This frame is the code after a graph break: its inputs ({name}) are "
            f"{resumed_from}'s locals: {mark_after_break(f'the {noun} you pass', 'them')}; "
            "removing the break removes this frame."
        )
    return f"{drop}; or mark {_dim(batch)} dynamic before the call: {mark}."


def _dim(batch: bool) -> str:
    return "the batch dim" if batch else "dim 0"


def _where_it_compiled_before(h: History, e: Entry, a: int) -> bool:
    """The cached graph made for the larger size `a` (the one whose guard on it failed) was
    compiled down the same lines of the user's as this call: a loop's last batch, after its
    full ones. From another line, it is other data (look 28, pytorch/examples'
    forward-forward: its test set, 500 in one batch, after its training set's 1000, read as
    "the last, partial batch", drop_last applied and the same recompiles). True where the
    trace keeps no stack or names no graph."""

    def lines(x: Entry) -> list[tuple[str, int]]:
        return [
            (f.file, f.line)
            for f in x.compile.stack
            if not is_library_file(f.file) and PROBE_PATH not in f.file
        ]

    larger = set()
    for r in reasons_of(e):
        cid, m = GUARD_CID_PREFIX.match(r.strip()), GUARD_SIZE.match(parse_guard(r).guard)
        if cid and m and m["i"] == "0" and int(m["a"]) == a:
            larger.add(cid.group(0).strip().rstrip(":"))
    frame = h.frame_of(e)
    before = [x for x in frame[: frame.index(e)] if unranked(x.compile_id) in larger]
    here = lines(e)
    return not here or not before or any(lines(x) == here for x in before)


def _loads_batches(c: Caller) -> bool:
    """The user's file that made the call makes a DataLoader: its dim 0 is a batch. (A look's
    word-language model cut its data along dim 0, the sequence, in chunks of 35: "a smaller
    batch (35 → 28)" named the wrong dim and a loader the job did not have.)"""
    if c.frame is None:
        return True
    return "DataLoader" in "".join(linecache.getlines(c.frame.file))


def _saves(after_break: bool, piece: str, framework: bool = False) -> str:
    """What a last batch's (or piece's) fix saves where torch made the dim dynamic. (drop_last
    on one loader: a look's VAE then recompiled at its test loader's last batch, 116, which the
    dynamic graph had served: the compile moved, not saved.) Under a framework's loop the
    advice is dynamic=True, not a mark (look 28: a Trainer's "marking it saves")."""
    if after_break:
        return "the fix saves this one compile"
    loaders = (
        " (drop it from each loader that feeds it: a test loader's last batch too)"
        if piece == "batch"
        else " (an evaluation's data cut the same way too)"
    )
    return (
        f"{'dynamic=True' if framework else 'marking it'} saves this one compile; dropping "
        f"the last {piece} saves it only where no "
        f"other size reaches the model later{loaders}"
    )


def _from(c: Caller) -> str:
    """Where the batch came from, in words: `at train.py:12 (in validate)`, `from minifit's
    loop (`training_epoch`, minifit/loops.py:9)`."""
    if c.by == CalledBy.USER and c.frame is not None:
        return f"at {where(c.frame)}"
    if c.by == CalledBy.FRAMEWORK and c.frame is not None:
        return f"from {possessive(c.framework)} loop ({shown(c.frame)})"
    if c.by == CalledBy.LIBRARY and c.frame is not None:
        return f"through {possessive(c.package)} own call ({shown(c.frame)})"
    return "this time"


def detach_at_call(e: Entry, g: Guard) -> str:
    """An input that requires grad in some calls and not in others, at the user's call that
    passes it: `.detach()` there (a look's forward-forward, its predict() with grad on:
    "Call the compiled model with the same requires_grad every time, or convert the input
    first"). '' where the call or the argument is not found (the guard's words then)."""
    m = GUARD_TENSOR_META.match(g.guard)
    c = e.caller
    if not m or m["what"] != "requires_grad" or c.by != CalledBy.USER or c.frame is None:
        return ""
    arg = argument_at(c.frame, e, source_name(m["n"]))
    if not arg or not markable(arg):
        return ""
    return detach_words(f"`{arg}`, which the call at {where(c.frame)} passes,", arg, "there")
