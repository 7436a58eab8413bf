"""A recompiling frame's input, where the user passes it: what the user's call passes for
it (`x` of `criterion(model(x), y)`, `batch["input_ids"]` of `model(**batch)`)."""

from __future__ import annotations

import ast
import linecache
import os
import re

from compilediag.analysis.history import Entry
from compilediag.trace.compiles import Frame

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
    """The user's line as the advice names it: `train.py:12 (in validate)`."""
    into = f" (in {f.name})" if f.name else ""
    return f"{os.path.basename(f.file)}:{f.line}{into}"
