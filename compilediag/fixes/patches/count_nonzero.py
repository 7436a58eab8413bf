"""`idx = torch.nonzero(x)` used only for its number of rows (`idx.shape[0]`,
`len(idx)`), or the rows counted on the line itself (`n = x.nonzero().shape[0]`): counted
with `torch.count_nonzero`, a 0-d tensor, so no output of data-dependent shape leaves the
graph."""

from __future__ import annotations

import libcst as cst

from compilediag.fixes.patches.base import Patch, Refused, Site, calls, dotted
from compilediag.fixes.patches.value_flow import check_value_uses

WHAT = "the rows of nonzero() counted with torch.count_nonzero (a 0-d tensor)"


def count_nonzero(site: Site, cause: str) -> Patch:
    stmt = site.statement()
    assign = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) else None
    if not (isinstance(assign, cst.Assign) and isinstance(assign.value, cst.Call)):
        return _counted_in_place(site, cause, stmt)
    arg = _nonzero_of(assign.value)
    if arg is None:  # (`n = len(x.nonzero())`: the count on the line)
        return _counted_in_place(site, cause, stmt)
    if len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Name):
        raise Refused("the indices are not assigned to one name")
    var = assign.targets[0].target.value
    fn = site.function(stmt)
    count = f"{var}_count"
    if count in site.module.code:
        raise Refused(f"the name {count} is taken")
    pairs: list[tuple[cst.CSTNode, cst.CSTNode]] = []
    for use in site.names_in(fn, var, site.line):
        whole = _row_count(site, use)
        if whole is None:
            raise Refused(
                f"line {site.start(use)}: the indices themselves are used, not only their count"
            )
        pairs.append((whole, cst.Name(count)))
    if not pairs:
        raise Refused("the indices are not used")
    for whole, _ in pairs:
        check_value_uses(site, fn, whole, site.line)
    new_assign = cst.parse_statement(
        f"{count} = torch.count_nonzero({cst.Module([]).code_for_node(arg)})\n"
    )
    assert isinstance(new_assign, cst.SimpleStatementLine)
    pairs.append((stmt, stmt.with_changes(body=new_assign.body)))
    return Patch(cause, site.line, site.replaced(*pairs), WHAT)


def _nonzero_of(call: cst.Call) -> cst.BaseExpression | None:
    """What a plain nonzero() call (`torch.nonzero(x)`, `torch.argwhere(x)`,
    `x.nonzero()`) is of, else None."""
    if dotted(call.func) in ("torch.nonzero", "torch.argwhere") and len(call.args) == 1:
        return call.args[0].value
    if isinstance(call.func, cst.Attribute) and call.func.attr.value == "nonzero":
        return None if call.args else call.func.value
    return None


def _counted_in_place(site: Site, cause: str, stmt: cst.CSTNode) -> Patch:
    """The line counts nonzero()'s rows itself (`n = x.nonzero().shape[0]`, `len(...)`):
    that count becomes torch.count_nonzero where the value it gives is used only in
    arithmetic with tensors."""
    found = [(c, a) for c in calls(stmt) if (a := _nonzero_of(c)) is not None]
    if len(found) != 1:
        raise Refused(
            "the patch counts one nonzero() call's rows with torch.count_nonzero; this line "
            f"has {len(found) or 'no'} such call{'s' * (len(found) != 1)}"
        )
    call, arg = found[0]
    whole = _row_count(site, call)
    if whole is None:
        raise Refused("the line uses nonzero()'s indices, not only their count")
    fn = site.function(stmt)
    check_value_uses(site, fn, whole, site.line)
    new = cst.parse_expression(f"torch.count_nonzero({cst.Module([]).code_for_node(arg)})")
    return Patch(cause, site.line, site.replaced((whole, new)), WHAT)


def _row_count(site: Site, use: cst.CSTNode) -> cst.CSTNode | None:
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
        if isinstance(call, cst.Call) and dotted(call.func) == "len":
            return call
    return None
