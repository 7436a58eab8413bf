"""`.item()`, `float(t)` or `.tolist()` whose value only meets tensors: kept a tensor (a
0-d one, or a tensor read element by element), so no Python number leaves the graph.
Refused wherever the number is used as one (`value_flow`)."""

from __future__ import annotations

import libcst as cst

from compilediag.fixes.patches.base import Patch, Refused, Site, dotted, literal
from compilediag.fixes.patches.value_flow import check_value_uses


def _method_calls(site: Site, method: str) -> list[cst.Call]:
    """Calls of `.method()` without arguments on the break's line, outermost first."""
    return [
        c for c in site.nodes(cst.Call)
        if isinstance(c.func, cst.Attribute) and c.func.attr.value == method and not c.args
    ]  # fmt: skip


def keep_tensor(site: Site, cause: str) -> Patch:
    """`.item()`, `float(t)`, `.tolist()` whose value only meets tensors: kept a tensor."""
    fn = site.function(site.statement())
    items = _method_calls(site, "item")
    if items:
        call = items[0]
        check_value_uses(site, fn, call, site.line)
        assert isinstance(call.func, cst.Attribute)
        return Patch(
            cause, site.line, site.replaced((call, call.func.value)),
            f"`{site.code(call)}` kept a 0-d tensor (no .item())",
        )  # fmt: skip
    floats = [c for c in site.nodes(cst.Call) if dotted(c.func) == "float" and len(c.args) == 1]
    if floats:
        call = floats[0]
        inner = call.args[0].value
        if _numpy_value(inner):  # float() of a NumPy value: dropping it keeps NumPy's scalar
            raise Refused(f"`{site.code(inner)}` is a NumPy value, not a tensor: no tensor to keep")
        check_value_uses(site, fn, call, site.line)
        return Patch(
            cause, site.line, site.replaced((call, inner)),
            f"`{site.code(call)}` kept as the 0-d tensor `{site.code(inner)}` (no float())",
        )  # fmt: skip
    tolists = _method_calls(site, "tolist")
    if tolists:
        return _keep_list(site, fn, tolists[0], cause)
    ints = [c for c in site.nodes(cst.Call) if dotted(c.func) == "int" and len(c.args) == 1]
    if ints:  # (a look read "no .item(), float() or .tolist()" beside int(h.sum()))
        raise Refused(
            f"`{site.code(ints[0])}`: int() makes a Python int; where it is read as one (a "
            "size, a range, an index) a tensor in its place is read there too, and of a "
            "float it truncates the fraction (no patch for int())"
        )
    raise Refused("no .item(), float(), int() or .tolist() on the line")


def _numpy_value(node: cst.BaseExpression) -> bool:
    """`t.numpy()`, `t.cpu().numpy()[0]`, `np.linalg.norm(a)`: a value NumPy made."""
    while isinstance(node, cst.Subscript):
        node = node.value
    if not isinstance(node, cst.Call):
        return False
    name = dotted(node.func) or ""
    if name.split(".")[0] in ("np", "numpy"):
        return True
    return isinstance(node.func, cst.Attribute) and node.func.attr.value == "numpy"


def _keep_list(site: Site, fn: cst.FunctionDef, call: cst.Call, cause: str) -> Patch:
    """`v = t.tolist()` read only as `v[0]` or `sum(v)`: `v` stays the tensor."""
    stmt = site.statement()
    assign = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) else None
    if not (
        isinstance(assign, cst.Assign)
        and assign.value is call
        and len(assign.targets) == 1
        and isinstance(assign.targets[0].target, cst.Name)
    ):
        raise Refused("the list is not assigned to one name")
    name = assign.targets[0].target.value
    pairs: list[tuple[cst.CSTNode, cst.CSTNode]] = []
    for use in site.names_in(fn, name, site.line):
        parent = site.parent(use)
        if isinstance(parent, cst.Subscript) and len(parent.slice) == 1:
            index = parent.slice[0].slice
            if not (isinstance(index, cst.Index) and literal(index.value)):
                raise Refused(  # (a look read "`counts[i]` is not one element")
                    f"line {site.start(use)}: `{site.code(parent)}` reads the list at an index "
                    "that is not a number written there; the patch keeps the tensor only where "
                    "each read is such an index or sum()"
                )
            check_value_uses(site, fn, parent, site.line)
        elif isinstance(parent, cst.Arg) and _called(site, parent, "sum"):
            whole = site.parent(parent)
            assert isinstance(whole, cst.Call)
            if len(whole.args) != 1:
                raise Refused(f"line {site.start(use)}: sum() with a start value")
            check_value_uses(site, fn, whole, site.line)
            pairs.append((whole, cst.parse_expression(f"{name}.sum()")))
        elif isinstance(parent, cst.Arg) and _called(site, parent, "len", 1):
            pass  # len() of the tensor is the list's (its first dim; a 0-d one raises alike)
        else:  # (an argument is shown with its call: `print(counts)`, not `counts`)
            shown = site.parent(parent) if isinstance(parent, cst.Arg) else parent
            raise Refused(
                f"line {site.start(use)}: `{name}` is used as a list "
                f"(`{site.code(shown or use)}`), not element by element"
            )
    assert isinstance(call.func, cst.Attribute)
    pairs.append((call, call.func.value))
    return Patch(
        cause, site.line, site.replaced(*pairs),
        f"`{name}` kept a tensor (no .tolist()); its elements are 0-d tensors",
    )  # fmt: skip


def _called(site: Site, arg: cst.Arg, name: str, args: int | None = None) -> bool:
    """`arg` is an argument of a call of `name` (with `args` arguments, where given)."""
    call = site.parent(arg)
    return (
        isinstance(call, cst.Call) and dotted(call.func) == name
        and (args is None or len(call.args) == args)
    )  # fmt: skip
