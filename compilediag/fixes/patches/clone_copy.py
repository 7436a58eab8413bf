"""`copy.deepcopy(tensor)`: `.detach().clone()`, the same values in memory of their own,
which Dynamo traces."""

from __future__ import annotations

import libcst as cst

from compilediag.fixes.patches.base import Patch, Refused, Site, dotted


def clone_copy(site: Site, cause: str) -> Patch:
    found = [c for c in site.nodes(cst.Call) if dotted(c.func) in ("copy.deepcopy", "deepcopy")]
    if not found or len(found[0].args) != 1:
        raise Refused("no copy.deepcopy(tensor) on the line")
    call = found[0]
    text = cst.Module([]).code_for_node(call.args[0].value)
    new = cst.parse_expression(f"{text}.detach().clone()")
    return Patch(
        cause,
        site.line,
        site.replaced((call, new)),
        "copy.deepcopy of a tensor → .detach().clone() (the same values, no shared memory)",
    )
