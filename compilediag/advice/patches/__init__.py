"""`compilediag fix`: a minimal source edit for a graph break whose cause compilediag
knows, made with libcst so that comments and formatting stay as they are.

Pure rewriting: no torch, nothing run. `propose(source, line, cause)` gives a `Patch` (the
whole file's new text and what the edit does) or a `NoPatch` (why not). Each construct is
one small function over the statement at the break's line; each refuses, with the
reason, where its rewrite could change what the code computes (a Python number used as a
size, a branch with an effect, a print argument with one). What a patch gives is then
verified by running it (cli/commands/fix.py): torch's own counts, outputs, time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import libcst as cst
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider

from compilediag.errors import UsageError


@dataclass(frozen=True)
class Patch:
    cause: str
    line: int
    text: str  # the whole file, patched
    what: str  # the edit, in words


@dataclass(frozen=True)
class NoPatch:
    cause: str
    line: int
    why: str


LOG_METHODS = frozenset(
    {"debug", "info", "warning", "warn", "error", "critical", "exception", "log"}
)
# calls a print's or a log's argument may make without an effect the guard would skip
PURE_CALLS = frozenset(
    {"len", "str", "repr", "format", "type", "round", "float", "int", "abs", "min", "max",
     "size", "dim", "numel", "mean", "sum", "std", "norm", "item", "tolist", "amax", "amin",
     "shape", "dtype", "device", "isinstance", "id", "tuple", "list", "any", "all"}
)  # fmt: skip
# builtins that take a Python number as a count, a size or an index
NUMBER_CALLS = frozenset(
    {"range", "int", "len", "bool", "str", "repr", "round", "list", "tuple", "float",
     "print", "format", "enumerate", "zip", "divmod", "hex", "chr", "slice", "isinstance"}
)  # fmt: skip
# NumPy functions with an exact torch twin: np name -> (torch function, how axis is named)
NUMPY_TWINS = {
    "mean": "torch.mean", "sum": "torch.sum", "std": "torch.std", "var": "torch.var",
    "clip": "torch.clamp", "abs": "torch.abs", "exp": "torch.exp", "log": "torch.log",
    "sqrt": "torch.sqrt", "max": "torch.amax", "min": "torch.amin", "amax": "torch.amax",
    "amin": "torch.amin", "percentile": "torch.quantile", "quantile": "torch.quantile",
    "median": "torch.quantile", "tanh": "torch.tanh", "maximum": "torch.maximum",
    "minimum": "torch.minimum", "where": "torch.where", "lexsort": "_lexsort",
}  # fmt: skip
LEXSORT_HELPER = '''

def _compilediag_lexsort(keys):
    """np.lexsort in torch: the last key sorts first; equal keys keep their order."""
    order = torch.arange(keys[0].shape[-1], device=keys[0].device)
    for key in keys:
        order = order[torch.argsort(key[order], stable=True)]
    return order
'''


class _Refused(Exception):
    """Why a construct's rewrite is not offered here."""


def parse(source: str, path: str = "the file") -> cst.Module:
    """The file's syntax tree; one line naming where it does not parse."""
    import ast

    try:  # Python's own parser names the line the user sees
        ast.parse(source)
    except SyntaxError as e:
        raise UsageError(
            f"{path} does not parse: line {e.lineno}: {e.msg}",
            hint="Fix the syntax error first; compilediag fix edits only a file Python reads.",
        ) from None
    try:
        return cst.parse_module(source)
    except cst.ParserSyntaxError as e:
        raise UsageError(
            f"{path} does not parse: line {e.raw_line}: {e.message}",
            hint="Fix the syntax error first; compilediag fix edits only a file Python reads.",
        ) from None


class Site:
    """The file, its nodes' positions and parents, and the break's line."""

    def __init__(self, source: str, line: int, path: str = "the file") -> None:
        self.wrapper = MetadataWrapper(parse(source, path))
        self.module = self.wrapper.module
        self.pos = self.wrapper.resolve(PositionProvider)
        self.parents = self.wrapper.resolve(ParentNodeProvider)
        self.line = line

    def start(self, node: cst.CSTNode) -> int:
        return self.pos[node].start.line

    def nodes(self, kind: type, line: int | None = None) -> list:
        """Nodes of a kind starting on a line (the break's by default), outermost first."""
        at = self.line if line is None else line
        found = [n for n, p in self.pos.items() if isinstance(n, kind) and p.start.line == at]
        return sorted(found, key=lambda n: (self.pos[n].start.column, -self.pos[n].end.line))

    def statement(self) -> cst.SimpleStatementLine | cst.BaseCompoundStatement:
        """The innermost statement that starts on the break's line."""
        found = self.nodes(cst.SimpleStatementLine) or self.nodes(cst.BaseCompoundStatement)
        if not found:
            raise _Refused(f"no statement starts at line {self.line}")
        return found[-1]

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.parents.get(node)

    def function(self, node: cst.CSTNode) -> cst.FunctionDef:
        p: cst.CSTNode | None = node
        while p is not None and not isinstance(p, cst.FunctionDef):
            p = self.parent(p)
        if p is None:
            raise _Refused("the line is not inside a function")
        return p

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node).strip()

    def replaced(self, *pairs: tuple[cst.CSTNode, cst.CSTNode | cst.RemovalSentinel]) -> str:
        """The file's text with each node replaced (or removed), in one pass."""
        swap = {id(old): new for old, new in pairs}

        class Swap(cst.CSTTransformer):
            def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode) -> Any:
                return swap.get(id(original), updated)

        return self.module.visit(Swap()).code

    def names_in(self, fn: cst.FunctionDef, name: str, after: int) -> Iterator[cst.Name]:
        """The loads of `name` in the function after a line (an attribute's name is none)."""
        for node, p in self.pos.items():
            if not isinstance(node, cst.Name) or node.value != name or p.start.line <= after:
                continue
            if not _inside(self, node, fn):
                continue
            parent = self.parent(node)
            if isinstance(parent, cst.Attribute) and parent.attr is node:
                continue
            if isinstance(parent, cst.Arg) and parent.keyword is node:
                continue
            if isinstance(parent, cst.AssignTarget | cst.AugAssign) or (
                isinstance(parent, cst.For) and parent.target is node
            ):
                raise _Refused(f"`{name}` is assigned again at line {p.start.line}")
            yield node


def _inside(site: Site, node: cst.CSTNode, outer: cst.CSTNode) -> bool:
    p: cst.CSTNode | None = node
    while p is not None:
        if p is outer:
            return True
        p = site.parent(p)
    return False


def _dotted(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr.value}" if base else ""
    return ""


def _mentions(node: cst.CSTNode, names: set[str]) -> bool:
    found = False

    class Visit(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            nonlocal found
            found |= n.value in names

    node.visit(Visit())
    return found


def _literal(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.UnaryOperation):
        return _literal(node.expression)
    return isinstance(node, cst.Integer | cst.Float | cst.Imaginary | cst.SimpleString)


def _calls(node: cst.CSTNode) -> list[cst.Call]:
    out: list[cst.Call] = []

    class Visit(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> None:
            out.append(n)

    node.visit(Visit())
    return out


def _has_torch(site: Site) -> None:
    for stmt in site.module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for s in stmt.body:
                if isinstance(s, cst.Import) and any(
                    _dotted(a.name) == "torch" and a.asname is None for a in s.names
                ):
                    return
    raise _Refused("the file has no `import torch` for the rewrite to use")


# --- print / logging / warnings: guarded by torch.compiler.is_compiling() -------------


def guard_call(site: Site, cause: str) -> Patch:
    stmt = site.statement()
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        raise _Refused("the call shares its line with other statements")
    expr = stmt.body[0]
    if not (isinstance(expr, cst.Expr) and isinstance(expr.value, cst.Call)):
        raise _Refused("the call's result is used, so the line can't be skipped")
    call = expr.value
    name = _dotted(call.func)
    known = (
        name == "print" if cause == "print"
        else name.rpartition(".")[2] in LOG_METHODS if cause == "logging"
        else name in ("warnings.warn", "warn") if cause == "warning"
        else False
    )  # fmt: skip
    if not known:
        raise _Refused(f"the line calls `{name or site.code(call.func)}`, not a {cause} call")
    for arg in call.args:
        for inner in _calls(arg.value):
            called = _dotted(inner.func).rpartition(".")[2]
            if called not in PURE_CALLS:
                raise _Refused(
                    f"an argument calls `{site.code(inner.func)}`, whose effect the guard "
                    "would skip under compile"
                )
        if any(isinstance(n, cst.NamedExpr) for n in _walk(arg.value)):
            raise _Refused("an argument assigns (:=), which the guard would skip")
    _has_torch(site)
    guarded = cst.If(
        test=cst.parse_expression("not torch.compiler.is_compiling()"),
        body=cst.IndentedBlock(body=[stmt.with_changes(leading_lines=[])]),
        leading_lines=stmt.leading_lines,
    )
    what = {
        "print": "print",
        "logging": "log call",
        "warning": "warning",
    }[cause]
    return Patch(
        cause, site.line, site.replaced((stmt, guarded)),
        f"the {what} runs in eager mode only (guarded by torch.compiler.is_compiling())",
    )  # fmt: skip


def _walk(node: cst.CSTNode) -> list[cst.CSTNode]:
    out: list[cst.CSTNode] = []

    class Visit(cst.CSTVisitor):
        def on_visit(self, n: cst.CSTNode) -> bool:
            out.append(n)
            return True

    node.visit(Visit())
    return out


# --- a Python number made from a tensor: kept a 0-d tensor ----------------------------


def check_value_uses(site: Site, fn: cst.FunctionDef, start: cst.CSTNode, after: int) -> None:
    """`start` (an expression that was a Python number, now a 0-d tensor) and every name
    it flows into are used only in arithmetic with another value (a tensor), returned or
    passed after such arithmetic: never as a count, a size, an index or a condition."""
    work: list[cst.CSTNode] = [start]
    tainted: set[str] = set()
    seen = 0
    while work:
        node = work.pop()
        seen += 1
        if seen > 200:
            raise _Refused("the value flows too far to follow")
        mixed = False
        parent = site.parent(node)
        while isinstance(parent, cst.BinaryOperation | cst.UnaryOperation):
            if isinstance(parent, cst.BinaryOperation):
                other = parent.right if parent.left is node else parent.left
                mixed |= not _literal(other) and not _mentions(other, tainted)
            node, parent = parent, site.parent(parent)
        line = site.start(node)
        text = site.code(node)
        if isinstance(parent, cst.Assign) and parent.value is node:
            if mixed:
                continue
            targets = [t.target for t in parent.targets]
            if len(targets) != 1 or not isinstance(targets[0], cst.Name):
                raise _Refused(f"line {line}: the value is unpacked or stored ({text})")
            name = targets[0].value
            tainted.add(name)
            work.extend(site.names_in(fn, name, site.start(parent)))
            continue
        if mixed and isinstance(parent, cst.Return | cst.Arg):
            call = site.parent(parent) if isinstance(parent, cst.Arg) else None
            if isinstance(call, cst.Call) and _dotted(call.func) in NUMBER_CALLS:
                raise _Refused(
                    f"line {line}: `{site.code(call)}` takes a Python number, not a tensor"
                )
            continue
        where = {
            cst.Return: "returned as a Python number",
            cst.Arg: "passed on as a Python number",
            cst.Comparison: "compared (a Python condition)",
            cst.ComparisonTarget: "compared (a Python condition)",
            cst.If: "a Python condition",
            cst.SubscriptElement: "an index",
            cst.Index: "an index",
            cst.Slice: "a slice bound",
            cst.FormattedStringExpression: "formatted as text",
            cst.Element: "an element of a tuple or list (a shape?)",
        }
        said = next((w for k, w in where.items() if isinstance(parent, k)), "used as a number")
        if isinstance(parent, cst.Arg):
            call = site.parent(parent)
            if isinstance(call, cst.Call) and _dotted(call.func) in NUMBER_CALLS:
                said = f"given to {site.code(call.func)}(), which takes a Python number"
        raise _Refused(f"line {line}: `{text}` is {said}; as a tensor it would change")


def _item_calls(site: Site) -> list[cst.Call]:
    return [
        c for c in site.nodes(cst.Call)
        if isinstance(c.func, cst.Attribute) and c.func.attr.value == "item" and not c.args
    ]  # fmt: skip


def keep_tensor(site: Site, cause: str) -> Patch:
    """`.item()`, `float(t)`, `.tolist()` whose value only meets tensors: kept a tensor."""
    fn = site.function(site.statement())
    items = _item_calls(site)
    if items:
        call = items[0]
        check_value_uses(site, fn, call, site.line)
        assert isinstance(call.func, cst.Attribute)
        return Patch(
            cause, site.line, site.replaced((call, call.func.value)),
            f"`{site.code(call)}` kept a 0-d tensor (no .item())",
        )  # fmt: skip
    floats = [c for c in site.nodes(cst.Call) if _dotted(c.func) == "float" and len(c.args) == 1]
    if floats:
        call = floats[0]
        check_value_uses(site, fn, call, site.line)
        return Patch(
            cause, site.line, site.replaced((call, call.args[0].value)),
            f"`{site.code(call)}` kept a 0-d tensor (no float())",
        )  # fmt: skip
    tolists = [
        c for c in site.nodes(cst.Call)
        if isinstance(c.func, cst.Attribute) and c.func.attr.value == "tolist" and not c.args
    ]  # fmt: skip
    if tolists:
        return _keep_list(site, fn, tolists[0], cause)
    raise _Refused("no .item(), float() or .tolist() on the line")


def _keep_list(site: Site, fn: cst.FunctionDef, call: cst.Call, cause: str) -> Patch:
    stmt = site.statement()
    assign = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) else None
    if not (
        isinstance(assign, cst.Assign)
        and assign.value is call
        and len(assign.targets) == 1
        and isinstance(assign.targets[0].target, cst.Name)
    ):
        raise _Refused("the list is not assigned to one name")
    name = assign.targets[0].target.value
    pairs: list[tuple[cst.CSTNode, cst.CSTNode]] = []
    for use in site.names_in(fn, name, site.line):
        parent = site.parent(use)
        if isinstance(parent, cst.Subscript) and len(parent.slice) == 1:
            index = parent.slice[0].slice
            if not (isinstance(index, cst.Index) and _literal(index.value)):
                raise _Refused(f"line {site.start(use)}: `{site.code(parent)}` is not one element")
            check_value_uses(site, fn, parent, site.line)
        elif isinstance(parent, cst.Arg) and _dotted(site.parent(parent).func) == "sum":  # type: ignore[union-attr]
            whole = site.parent(parent)
            assert isinstance(whole, cst.Call)
            if len(whole.args) != 1:
                raise _Refused(f"line {site.start(use)}: sum() with a start value")
            check_value_uses(site, fn, whole, site.line)
            pairs.append((whole, cst.parse_expression(f"{name}.sum()")))
        else:
            raise _Refused(
                f"line {site.start(use)}: `{name}` is used as a list "
                f"(`{site.code(parent or use)}`), not element by element"
            )
    assert isinstance(call.func, cst.Attribute)
    pairs.append((call, call.func.value))
    return Patch(
        cause, site.line, site.replaced(*pairs),
        f"`{name}` kept a tensor (no .tolist()); its elements are 0-d tensors",
    )  # fmt: skip


# --- a data-dependent `if` whose branches are tensors: torch.where --------------------


def _branch_value(site: Site, block: cst.BaseSuite) -> cst.BaseSmallStatement:
    if not isinstance(block, cst.IndentedBlock) or len(block.body) != 1:
        raise _Refused("a branch holds more than one statement")
    line = block.body[0]
    if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
        raise _Refused("a branch is not one assignment or return")
    small = line.body[0]
    value = small.value if isinstance(small, cst.Return | cst.Assign) else None
    if value is None:
        raise _Refused("a branch is not one assignment or return")
    for call in _calls(value):
        name = _dotted(call.func)
        last = name.rpartition(".")[2]
        if last.endswith("_") and not last.endswith("__"):
            raise _Refused(f"a branch changes a tensor in place ({site.code(call.func)})")
        if isinstance(call.func, cst.Name) and name not in ("abs", "min", "max", "float"):
            raise _Refused(
                f"a branch calls `{name}()`: evaluating both sides would run its effects"
            )
    return small


def _condition(site: Site, test: cst.BaseExpression) -> cst.BaseExpression:
    """The condition as a tensor: `.item()` and `bool()` dropped."""
    if isinstance(test, cst.Call) and _dotted(test.func) == "bool" and len(test.args) == 1:
        test = test.args[0].value
    for call in _calls(test):
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "item":
            test = test.deep_replace(call, call.func.value)
        elif _dotted(call.func) == "torch.equal":
            raise _Refused("torch.equal also compares shapes; no tensor twin is exact")
    if isinstance(test, cst.BooleanOperation) or (
        isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)
    ):
        raise _Refused("the condition uses and/or/not (Python truth of tensors)")
    return test.with_changes(lpar=[], rpar=[]) if hasattr(test, "lpar") else test


def where_branch(site: Site, cause: str) -> Patch:
    stmt = site.statement()
    if not isinstance(stmt, cst.If):
        raise _Refused("the break's line is not an `if` statement")
    if stmt.orelse is not None and not isinstance(stmt.orelse, cst.Else):
        raise _Refused("the `if` has an elif")
    _has_torch(site)
    cond = cst.Module([]).code_for_node(_condition(site, stmt.test))
    yes = _branch_value(site, stmt.body)
    fn = site.function(stmt)
    if isinstance(yes, cst.Return):
        return _where_return(site, stmt, yes, cond, cause, fn)
    assert isinstance(yes, cst.Assign)
    if len(yes.targets) != 1 or not isinstance(yes.targets[0].target, cst.Name):
        raise _Refused("the branch assigns more than one name")
    name = yes.targets[0].target.value
    other = name
    if stmt.orelse is not None:
        no = _branch_value(site, stmt.orelse.body)
        if not (
            isinstance(no, cst.Assign)
            and len(no.targets) == 1
            and isinstance(no.targets[0].target, cst.Name)
            and no.targets[0].target.value == name
        ):
            raise _Refused("the branches assign different names")
        other = cst.Module([]).code_for_node(no.value)
    true = cst.Module([]).code_for_node(yes.value)
    new = _as_line(f"{name} = torch.where({cond}, {true}, {other})\n", stmt)
    return Patch(
        cause, site.line, site.replaced((stmt, new)),
        "the branch is computed on both sides and picked with torch.where",
    )  # fmt: skip


def _as_line(text: str, stmt: cst.If) -> cst.SimpleStatementLine:
    """One statement in place of the `if`: its blank lines above, its header's comment."""
    new = cst.parse_statement(text)
    assert isinstance(new, cst.SimpleStatementLine)
    header = stmt.body.header if isinstance(stmt.body, cst.IndentedBlock) else None
    trailing = header if header is not None and header.comment else new.trailing_whitespace
    return new.with_changes(leading_lines=stmt.leading_lines, trailing_whitespace=trailing)


def _where_return(
    site: Site, stmt: cst.If, yes: cst.Return, cond: str, cause: str, fn: cst.FunctionDef
) -> Patch:
    if stmt.orelse is not None:
        no = _branch_value(site, stmt.orelse.body)
        after: cst.CSTNode | None = None
    else:  # `if c: return a` then `return b` as the next statement
        block = site.parent(stmt)
        body = list(block.body) if isinstance(block, cst.IndentedBlock) else []
        i = next((k for k, s in enumerate(body) if s is stmt), -1)
        nxt = body[i + 1] if 0 <= i < len(body) - 1 else None
        if not isinstance(nxt, cst.SimpleStatementLine) or len(nxt.body) != 1:
            raise _Refused("the `if` returns, and what follows it is not one return")
        no, after = nxt.body[0], nxt
        _branch_value(site, cst.IndentedBlock(body=[nxt]))
    if not isinstance(no, cst.Return) or yes.value is None or no.value is None:
        raise _Refused("one branch returns and the other does not")
    code = cst.Module([]).code_for_node
    true, false = code(yes.value), code(no.value)
    if "," in true or "," in false:
        raise _Refused("a branch returns several values")
    new = _as_line(f"return torch.where({cond}, {true}, {false})\n", stmt)
    if after is None:
        return Patch(
            cause, site.line, site.replaced((stmt, new)),
            "both returns are computed and picked with torch.where",
        )  # fmt: skip
    return Patch(
        cause, site.line, site.replaced((stmt, new), (after, cst.RemoveFromParent())),
        "both returns are computed and picked with torch.where",
    )  # fmt: skip


# --- torch.nonzero(...).shape[0]: torch.count_nonzero ---------------------------------


def count_nonzero(site: Site, cause: str) -> Patch:
    stmt = site.statement()
    assign = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) else None
    if not (isinstance(assign, cst.Assign) and isinstance(assign.value, cst.Call)):
        raise _Refused("the line does not assign a nonzero() result")
    call = assign.value
    name = _dotted(call.func)
    if name in ("torch.nonzero", "torch.argwhere") and len(call.args) == 1:
        arg = call.args[0].value
    elif (
        isinstance(call.func, cst.Attribute) and call.func.attr.value == "nonzero" and not call.args
    ):
        arg = call.func.value
    else:
        raise _Refused(f"the line calls `{site.code(call.func)}`, not a plain nonzero()")
    if len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Name):
        raise _Refused("the indices are not assigned to one name")
    var = assign.targets[0].target.value
    fn = site.function(stmt)
    count = f"{var}_count"
    if count in site.module.code:
        raise _Refused(f"the name {count} is taken")
    pairs: list[tuple[cst.CSTNode, cst.CSTNode]] = []
    for use in site.names_in(fn, var, site.line):
        whole = _row_count(site, use)
        if whole is None:
            raise _Refused(
                f"line {site.start(use)}: the indices themselves are used, not only their count"
            )
        pairs.append((whole, cst.Name(count)))
    if not pairs:
        raise _Refused("the indices are not used")
    for whole, _ in pairs:
        check_value_uses(site, fn, whole, site.line)
    new_assign = cst.parse_statement(
        f"{count} = torch.count_nonzero({cst.Module([]).code_for_node(arg)})\n"
    )
    assert isinstance(new_assign, cst.SimpleStatementLine)
    pairs.append((stmt, stmt.with_changes(body=new_assign.body)))
    return Patch(
        cause, site.line, site.replaced(*pairs),
        "the rows of nonzero() counted with torch.count_nonzero (a 0-d tensor)",
    )  # fmt: skip


def _row_count(site: Site, use: cst.Name) -> cst.CSTNode | None:
    """`x.shape[0]`, `x.size(0)` or `len(x)` around a use of x, else None."""
    parent = site.parent(use)
    if isinstance(parent, cst.Attribute) and parent.attr.value == "shape":
        sub = site.parent(parent)
        if isinstance(sub, cst.Subscript) and site.code(sub).endswith("[0]"):
            return sub
    if isinstance(parent, cst.Attribute) and parent.attr.value == "size":
        call = site.parent(parent)
        if isinstance(call, cst.Call) and site.code(call).endswith("(0)"):
            return call
    if isinstance(parent, cst.Arg):
        call = site.parent(parent)
        if isinstance(call, cst.Call) and _dotted(call.func) == "len":
            return call
    return None


# --- NumPy on tensors: the torch twin -------------------------------------------------


def numpy_twin(site: Site, cause: str) -> Patch:
    stmt = site.statement()
    _has_torch(site)
    calls = [c for c in site.nodes(cst.Call) if _dotted(c.func).startswith(("np.", "numpy."))]
    if not calls:
        return _byte_count(site, stmt, cause)
    call = calls[0]
    fname = _dotted(call.func).rpartition(".")[2]
    if fname not in NUMPY_TWINS:
        raise _Refused(f"np.{fname} has no torch twin compilediag knows")
    numpys = [
        c for c in _calls(call)
        if isinstance(c.func, cst.Attribute) and c.func.attr.value == "numpy" and not c.args
    ]  # fmt: skip
    if not numpys:
        raise _Refused(f"np.{fname}'s argument does not come from a tensor's .numpy()")
    code = cst.Module([]).code_for_node
    new_call: cst.BaseExpression = call
    for n in numpys:
        assert isinstance(n.func, cst.Attribute)
        new_call = new_call.deep_replace(n, n.func.value)
    assert isinstance(new_call, cst.Call)
    args = list(new_call.args)
    kw = {a.keyword.value: a for a in args if a.keyword is not None}
    pos = [a for a in args if a.keyword is None]
    if set(kw) - {"axis", "keepdims", "ddof", "q", "a_min", "a_max"}:
        raise _Refused(f"np.{fname} is called with {', '.join(sorted(kw))}")
    helper = ""
    if fname == "lexsort":
        if len(args) != 1 or kw:
            raise _Refused("np.lexsort with an axis")
        text = f"_compilediag_lexsort({code(pos[0].value)})"
        if "_compilediag_lexsort" not in site.module.code:
            helper = LEXSORT_HELPER
    else:
        parts = [code(a.value) for a in pos]
        if fname in ("percentile", "quantile", "median"):
            if fname == "median":
                parts.append("0.5")
            elif len(parts) != 2:
                raise _Refused(f"np.{fname} without q")
            elif fname == "percentile":
                parts[1] = f"{parts[1]} / 100"
            parts[1] = f"torch.as_tensor({parts[1]}, dtype={parts[0]}.dtype)"
        if fname == "clip":
            lo = kw.pop("a_min", None)
            hi = kw.pop("a_max", None)
            if lo is not None or hi is not None:
                parts += [code(x.value) if x else "None" for x in (lo, hi)]
        if "axis" in kw:
            parts.append(f"dim={code(kw.pop('axis').value)}")
        if "keepdims" in kw:
            parts.append(f"keepdim={code(kw.pop('keepdims').value)}")
        if fname in ("std", "var"):
            ddof = kw.pop("ddof", None)
            parts.append(f"correction={code(ddof.value) if ddof else '0'}")
        if kw:
            raise _Refused(f"np.{fname} is called with {', '.join(sorted(kw))}")
        text = f"{NUMPY_TWINS[fname]}({', '.join(parts)})"
    pairs: list[tuple[cst.CSTNode, cst.CSTNode]] = [(call, cst.parse_expression(text))]
    assign = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) else None
    if isinstance(assign, cst.Assign) and len(assign.targets) == 1:
        target = assign.targets[0].target
        if isinstance(target, cst.Name):
            fn = site.function(stmt)
            for use in site.names_in(fn, target.value, site.line):
                arg = site.parent(use)
                conv = site.parent(arg) if isinstance(arg, cst.Arg) else None
                if isinstance(conv, cst.Call) and _dotted(conv.func) in (
                    "torch.from_numpy", "torch.as_tensor", "torch.tensor",
                ):  # fmt: skip
                    pairs.append((conv, cst.Name(target.value)))
    new = site.replaced(*pairs)
    if helper:
        new = new.rstrip("\n") + "\n" + helper
    return Patch(
        cause, site.line, new, f"np.{fname} on the tensor's NumPy copy → {text.split('(')[0]}"
    )


def _byte_count(site: Site, stmt: cst.CSTNode, cause: str) -> Patch:
    """`raw = t.numpy().tobytes()` whose only use is `len(raw)`: t's size in bytes."""
    assign = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) else None
    value = assign.value if isinstance(assign, cst.Assign) else None
    inner = (
        value.func.value
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
        else None
    )
    if not (
        isinstance(assign, cst.Assign)
        and isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value == "tobytes"
        and isinstance(inner, cst.Call)
        and isinstance(inner.func, cst.Attribute)
        and inner.func.attr.value == "numpy"
        and len(assign.targets) == 1
        and isinstance(assign.targets[0].target, cst.Name)
    ):
        raise _Refused("no NumPy function on the line (an ndarray method has no torch twin here)")
    name = assign.targets[0].target.value
    tensor = cst.Module([]).code_for_node(inner.func.value)
    count = f"{name}_nbytes"
    if count in site.module.code:
        raise _Refused(f"the name {count} is taken")
    pairs: list[tuple[cst.CSTNode, cst.CSTNode]] = []
    for use in site.names_in(site.function(stmt), name, site.line):
        arg = site.parent(use)
        call = site.parent(arg) if isinstance(arg, cst.Arg) else None
        if not (isinstance(call, cst.Call) and _dotted(call.func) == "len"):
            raise _Refused(
                f"line {site.start(use)}: the bytes themselves are used, not their count"
            )
        pairs.append((call, cst.Name(count)))
    new = cst.parse_statement(f"{count} = {tensor}.numel() * {tensor}.element_size()\n")
    assert isinstance(new, cst.SimpleStatementLine)
    pairs.append((stmt, stmt.with_changes(body=new.body)))
    return Patch(
        cause, site.line, site.replaced(*pairs),
        "len() of a tensor's bytes → numel() * element_size() (no NumPy copy)",
    )  # fmt: skip


# --- sorted() over tensors, copy.deepcopy(tensor), a class made in forward ------------


def sort_stacked(site: Site, cause: str) -> Patch:
    calls = [c for c in site.nodes(cst.Call) if _dotted(c.func) == "sorted"]
    if not calls or len(calls[0].args) != 1 or calls[0].args[0].keyword is not None:
        raise _Refused("no sorted(LIST) without key or reverse on the line")
    call = calls[0]
    items = call.args[0].value
    if not isinstance(items, cst.List | cst.Tuple):
        raise _Refused("sorted() of something other than a list of tensors written out")
    _has_torch(site)
    text = cst.Module([]).code_for_node(items)
    new = cst.parse_expression(f"list(torch.sort(torch.stack({text}), stable=True).values)")
    return Patch(
        cause,
        site.line,
        site.replaced((call, new)),
        "sorted() of 0-d tensors → torch.sort of them stacked (stable, as sorted is)",
    )


def clone_copy(site: Site, cause: str) -> Patch:
    calls = [c for c in site.nodes(cst.Call) if _dotted(c.func) in ("copy.deepcopy", "deepcopy")]
    if not calls or len(calls[0].args) != 1:
        raise _Refused("no copy.deepcopy(tensor) on the line")
    call = calls[0]
    text = cst.Module([]).code_for_node(call.args[0].value)
    new = cst.parse_expression(f"{text}.detach().clone()")
    return Patch(
        cause,
        site.line,
        site.replaced((call, new)),
        "copy.deepcopy of a tensor → .detach().clone() (the same values, no shared memory)",
    )


def hoist_class(site: Site, cause: str) -> Patch:
    stmt = site.statement()
    if not isinstance(stmt, cst.ClassDef):
        raise _Refused("the break's line is not a class statement")
    fn = site.function(stmt)
    local = {p.name.value for p in fn.params.params}
    inner = {id(n) for n in _walk(stmt)}
    for node in _walk(fn.body):
        if id(node) in inner:
            continue
        if isinstance(node, cst.AssignTarget | cst.For) and isinstance(node.target, cst.Name):
            local.add(node.target.value)
    used = {n.value for n in _walk(stmt) if isinstance(n, cst.Name)}
    if used & local:
        raise _Refused(f"the class uses forward's locals ({', '.join(sorted(used & local))})")
    top: cst.CSTNode = fn
    while not isinstance(site.parent(top), cst.Module):
        top = site.parent(top)  # type: ignore[assignment]
    name = stmt.name.value
    if any(
        isinstance(s, cst.ClassDef | cst.FunctionDef) and s.name.value == name
        for s in site.module.body
    ):
        raise _Refused(f"the module already defines {name}")
    moved = stmt.with_changes(leading_lines=[])
    module = cst.parse_module(site.replaced((stmt, cst.RemoveFromParent())))
    body = list(module.body)
    index = next(i for i, s in enumerate(site.module.body) if s is top)
    spacing = [cst.EmptyLine(), cst.EmptyLine()]
    body.insert(index, moved.with_changes(leading_lines=body[index].leading_lines))
    body[index + 1] = body[index + 1].with_changes(leading_lines=spacing)
    return Patch(
        cause,
        site.line,
        module.with_changes(body=body).code,
        f"class {name} defined once at module level, not on every call",
    )


# cause -> the construct that rewrites it
CONSTRUCTS: dict[str, Callable[[Site, str], Patch]] = {
    "print": guard_call,
    "logging": guard_call,
    "warning": guard_call,
    "item": keep_tensor,
    "tolist": keep_tensor,
    "item_branch": where_branch,
    "data_dependent_branch": where_branch,
    "data_dependent_op": where_branch,
    "dynamic_output_shape": count_nonzero,
    "numpy": numpy_twin,
    "sort_tensors": sort_stacked,
    "copy_tensor": clone_copy,
    "class_definition": hoist_class,
}


def propose(source: str, line: int, cause: str, path: str = "the file") -> Patch | NoPatch:
    """A rewrite of the file for the break at `line`, or why there is none. A file that
    does not parse raises UsageError (its line)."""
    site = Site(source, line, path)
    construct = CONSTRUCTS.get(cause)
    if construct is None:
        return NoPatch(cause, line, f"no code rewrite is known for this cause ({cause or 'other'})")
    try:
        patch = construct(site, cause)
    except _Refused as why:
        return NoPatch(cause, line, str(why))
    try:
        compile(patch.text, path, "exec")
    except SyntaxError as e:  # a bug of a construct: never offered
        return NoPatch(cause, line, f"the rewrite did not parse ({e.msg})")
    return patch


# --- what `compilediag fix` found: the data the renderers read ------------------------


@dataclass
class Evidence:
    """A kept patch, measured: torch's counts, outputs against the original's, time."""

    gb_id: str
    graphs: tuple[int, int]  # before, after
    graph_breaks: tuple[int, int]
    recompiles: tuple[int, int]
    eager_err: float  # max abs error against the original's eager outputs
    compiled_err: float  # the same, compiled
    compiled_ms: tuple[float | None, float | None]  # the compiled call, median
    grad_err: float | None = None  # --train: the parameters' gradients, eager and compiled

    def text(self) -> str:
        g0, g1 = self.graphs
        err = max(self.eager_err, self.compiled_err, self.grad_err or 0.0)
        equal = "outputs" if self.grad_err is None else "outputs and gradients"
        parts = [
            f"{self.gb_id or 'the break'} gone",
            f"{g0} graph{'s' * (g0 != 1)} → {g1}",
            f"{equal} equal (max abs err {err:.3g})",
        ]
        before, after = self.compiled_ms
        if before is not None and after is not None:
            slower = " (slower)" if after > before * 1.05 else ""
            parts.append(f"compiled call {_ms(before)} → {_ms(after)} ms{slower}")
        return "; ".join(parts)


def _ms(value: float) -> str:
    return f"{value:.3g}" if value < 10 else f"{value:.0f}"


@dataclass
class BreakFix:
    """One graph break and what `fix` did about it."""

    file: str
    line: int
    code: str
    cause: str
    gb_id: str
    reason: str
    patched: bool = False
    what: str = ""  # the edit, in words
    diff: str = ""  # the kept patch, as a unified diff
    evidence: Evidence | None = None
    why: str = ""  # why there is no patch
    advice: str = ""  # today's advice for it


@dataclass
class FixResult:
    file: str  # the target, as shown
    sha256: str  # the file's content when the run began
    breaks: list[BreakFix]
    diff: str = ""  # every kept patch, together
    applied: str = ""  # --apply: where the original was kept
    torch: str = ""  # the torch that ran it
    setup: str = ""  # device · backend/mode, as explain's header
    # the recompiles of the run: none is patched (no rewrite is known that keeps what the
    # code does), each with why and today's advice
    recompiles: list[RecompileFix] = field(default_factory=list)
    text: str = ""  # the file with every kept patch (not in the JSON: `diff` says it)


@dataclass
class RecompileFix:
    """A recompile of the run, and why `fix` made no patch for it."""

    file: str  # where the guard was installed (the frame's, where that is not known)
    line: int
    code: str
    cause: str  # compilediag's: shape, length, int, ...
    guard: str  # the failed guard, in words
    count: int  # recompiles of this guard
    why: str
    advice: str
