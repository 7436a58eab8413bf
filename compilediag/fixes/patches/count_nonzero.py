"""`idx = torch.nonzero(x)` used only for its number of rows (`idx.shape[0]`,
`len(idx)`): counted with `torch.count_nonzero`, a 0-d tensor, so no output of
data-dependent shape leaves the graph."""

from __future__ import annotations

import libcst as cst

from compilediag.fixes.patches.base import Patch, Refused, Site, dotted
from compilediag.fixes.patches.value_flow import check_value_uses


def count_nonzero(site: Site, cause: str) -> Patch:
    stmt = site.statement()
    assign = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) else None
    if not (isinstance(assign, cst.Assign) and isinstance(assign.value, cst.Call)):
        raise Refused("the line does not assign a nonzero() result")
    call = assign.value
    name = dotted(call.func)
    if name in ("torch.nonzero", "torch.argwhere") and len(call.args) == 1:
        arg = call.args[0].value
    elif (
        isinstance(call.func, cst.Attribute) and call.func.attr.value == "nonzero" and not call.args
    ):
        arg = call.func.value
    else:
        raise Refused(f"the line calls `{site.code(call.func)}`, not a plain nonzero()")
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
        if isinstance(call, cst.Call) and dotted(call.func) == "len":
            return call
    return None
