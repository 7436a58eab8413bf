"""The user's source lines, read once when the Report is built (never at render time), so
a saved report renders the same on a machine that has none of the user's files."""

from __future__ import annotations

import linecache
import re
from collections.abc import Sequence
from typing import Any

from compilediag.report.model import SourceLine

CONTEXT_LINES = 2  # lines shown above and below a site


def code_at(file: str, line: int) -> str:
    return linecache.getline(file, line).strip() if file and line > 0 else ""


def context_at(file: str, line: int, around: int = CONTEXT_LINES) -> list[SourceLine]:
    """The lines around a site, as written (indentation kept); empty if the file is gone."""
    if not file or line <= 0 or file.startswith("<"):
        return []
    lines = linecache.getlines(file)
    if not lines or line > len(lines):
        return []
    lo, hi = max(1, line - around), min(len(lines), line + around)
    return [SourceLine(n, lines[n - 1].rstrip("\n")) for n in range(lo, hi + 1)]


def _tree(file: str) -> Any:
    """`file`'s syntax tree, None where it can't be read or parsed."""
    import ast

    text = "".join(linecache.getlines(file)) if file and not file.startswith("<") else ""
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


def _function_at(file: str, line: int) -> Any:
    """The innermost function (an ast.FunctionDef or AsyncFunctionDef) of `file` that holds
    `line`, its decorators counted; None where there is none or the file can't be read."""
    import ast

    tree = _tree(file)
    if tree is None:
        return None
    holding = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
        and min([n.lineno] + [d.lineno for d in n.decorator_list])
        <= line
        <= (n.end_lineno or n.lineno)
    ]
    return max(holding, key=lambda n: n.lineno, default=None)


def in_autograd_function(file: str, line: int) -> bool:
    """`line` is in a method of a class of `file` that derives from torch.autograd.Function
    (its base written `torch.autograd.Function`, `autograd.Function` or `Function`)."""
    import ast

    tree = _tree(file)
    return tree is not None and any(
        isinstance(n, ast.ClassDef)
        and n.lineno <= line <= (n.end_lineno or n.lineno)
        and any(ast.unparse(b).split(".")[-1] == "Function" for b in n.bases)
        for n in ast.walk(tree)
    )


def assignments_in_function(file: str, line: int, target: str) -> list[tuple[int, str]]:
    """The lines of the innermost function of `file` that holds `line` that assign
    `target` (an attribute chain as written: `self.config.problem_type`), by `=`, an
    augmented assignment or `setattr(self.config, "problem_type", ...)`, each with the
    value's text; empty where the file can't be read or parsed."""
    import ast

    fn = _function_at(file, line)
    if fn is None:
        return []
    out = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AugAssign | ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "setattr"
            and len(node.args) == 3
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            name = f"{ast.unparse(node.args[0])}.{node.args[1].value}"
            if name == target:
                out.append((node.lineno, ast.unparse(node.args[2])))
            continue
        else:
            continue
        if any(ast.unparse(t) == target for t in targets):
            out.append((node.lineno, ast.unparse(value)))
    return sorted(out)


# calls that only report: a print, a log's or warnings' call
REPORTING = re.compile(r"^(?:print|warnings\.\w+|logging\.\w+|(?:\w+\.)*_?log(?:ger)?\.\w+)$")


def branch_only_reports(file: str, line: int) -> bool:
    """The `if` at `line` of `file` whose branches only report (a print, a log's or
    warnings' call, a raise): nothing torch.where could pick between. False where the file
    can't be read or the line holds no `if`."""
    import ast

    text = "".join(linecache.getlines(file)) if file and not file.startswith("<") else ""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    found = next((n for n in ast.walk(tree) if isinstance(n, ast.If) and n.lineno == line), None)
    if found is None:
        return False

    def reports(s: ast.stmt) -> bool:
        if isinstance(s, ast.Raise):
            return True
        call = s.value if isinstance(s, ast.Expr) else None
        return isinstance(call, ast.Call) and bool(REPORTING.match(ast.unparse(call.func)))

    return all(reports(s) for s in [*found.body, *found.orelse])


# loops over these are over Python values already (a list, a range): no tensor indexes
PYTHON_ITERS = re.compile(r"^(?:range|enumerate|zip|list|sorted|reversed|.*\.tolist)$")


def indexes_item_by_item(file: str, function: str) -> bool:
    """`function` (a name, defined in `file`) indexes with each item of a loop over a value
    that is not a Python list or range (`for i in ix: d[i : i + n]`, a comprehension
    alike): over a tensor, each item a 0-d tensor. False where it can't be found or read."""
    import ast

    text = "".join(linecache.getlines(file)) if file and not file.startswith("<") else ""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    name = function.rpartition(".")[2]
    defs = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name]

    def over_items(target: ast.expr, iterable: ast.expr, body: Sequence[ast.AST]) -> bool:
        if not isinstance(target, ast.Name) or isinstance(iterable, ast.List | ast.Tuple):
            return False
        if isinstance(iterable, ast.Call) and PYTHON_ITERS.match(ast.unparse(iterable.func)):
            return False
        return any(
            isinstance(n, ast.Subscript)
            and any(isinstance(m, ast.Name) and m.id == target.id for m in ast.walk(n.slice))
            for b in body for n in ast.walk(b)
        )  # fmt: skip

    for fn in defs:
        for node in ast.walk(fn):
            if isinstance(node, ast.For) and over_items(node.target, node.iter, node.body):
                return True
            if isinstance(node, ast.ListComp | ast.GeneratorExp | ast.SetComp):
                if any(over_items(g.target, g.iter, [node.elt]) for g in node.generators):
                    return True
    return False


def branched_on(file: str, line: int) -> tuple[int, str] | None:
    """Where the name the statement at `line` assigns (`conf = probs.max().item()`) is next
    a Python condition in the same function (an `if`, `while`, `assert` or conditional
    expression's test): its line and code. None where there is none, or the file can't be
    read."""
    import ast

    found = _assigned_at(file, line)
    if found is None:
        return None
    fn, name = found
    tests = [
        n.test for n in ast.walk(fn)
        if isinstance(n, ast.If | ast.While | ast.Assert | ast.IfExp) and n.lineno > line
    ]  # fmt: skip
    uses = sorted(
        t.lineno for t in tests
        if any(isinstance(x, ast.Name) and x.id == name for x in ast.walk(t))
    )  # fmt: skip
    return (uses[0], code_at(file, uses[0])) if uses else None


def read_later(file: str, line: int) -> tuple[str, int, str] | None:
    """The name the statement at `line` assigns (`rows = keep.nonzero().tolist()`), and
    where it is next read in the same function, on a later line, other than as an operand of
    arithmetic (`h / threshold` traces with the value a symbol: torch's explain finds no break
    there), by len() (a list's length is the tensor's: a look's `print(len(counts))` kept
    no break with the list's numbers symbols) or at a constant index: that line and its code. None where there is
    none, or the file can't be read."""
    import ast

    found = _assigned_at(file, line)
    if found is None:
        return None
    fn, name = found
    operands = {
        id(x) for n in ast.walk(fn) if isinstance(n, ast.BinOp | ast.UnaryOp)
        for x in ((n.left, n.right) if isinstance(n, ast.BinOp) else (n.operand,))
    } | {id(n.args[0]) for n in ast.walk(fn) if isinstance(n, ast.Call) and _length_of(n)} | {
        # an element read at a constant index (`first = lengths[0]`): a number like the
        # others, kept a symbol (an eighteenth look: torch kept no break there)
        id(n.value) for n in ast.walk(fn)
        if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant)
        and isinstance(n.slice.value, int)
    }  # fmt: skip
    reads = sorted(
        n.lineno for n in ast.walk(fn)
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
        and n.lineno > line and id(n) not in operands
    )  # fmt: skip
    return (name, reads[0], code_at(file, reads[0])) if reads else None


def _length_of(node: Any) -> bool:
    """`len(x)`: the call reads no value of `x`, only how many it holds."""
    import ast

    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len"
        and len(node.args) == 1 and not node.keywords
    )  # fmt: skip


def reads_values(code: str, name: str) -> bool:
    """`name` is passed on as a value in `code`: read other than by len()
    (`print("batch", len(counts))` reads none of the list's values) or an f-string's field
    (`print(f"positive {n}")`: the string torch builds, which it defers as it is)."""
    import ast

    try:
        tree = ast.parse(code.strip())
    except SyntaxError:  # (a piece of a statement): by its text, len() left out
        rest = re.sub(rf"\blen\(\s*{re.escape(name)}\s*\)", "", code)
        return re.search(rf"\b{re.escape(name)}\b", rest) is not None
    hidden: set[int] = set()
    for node in ast.walk(tree):
        is_len = (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "len"
        )  # fmt: skip
        if isinstance(node, ast.JoinedStr) or is_len:
            hidden.update(id(n) for n in ast.walk(node))
    return any(
        isinstance(n, ast.Name) and n.id == name and id(n) not in hidden for n in ast.walk(tree)
    )


def _assigned_at(file: str, line: int) -> tuple[Any, str] | None:
    """The function holding `line`, and the one name the statement there assigns."""
    import ast

    fn = _function_at(file, line)
    if fn is None:
        return None
    assigned = next(
        (n for n in ast.walk(fn) if isinstance(n, ast.Assign) and n.lineno == line), None
    )
    if (
        assigned is None
        or len(assigned.targets) != 1
        or not isinstance(assigned.targets[0], ast.Name)
    ):
        return None
    return fn, assigned.targets[0].id
