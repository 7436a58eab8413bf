"""`sorted([a, b, ...])` of 0-d tensors: `torch.sort` of them stacked, stable as `sorted`
is, so the comparison of tensors stays in the graph."""

from __future__ import annotations

import libcst as cst

from compilediag.fixes.patches.base import Patch, Refused, Site, dotted, require_torch


def sort_stacked(site: Site, cause: str) -> Patch:
    found = [c for c in site.nodes(cst.Call) if dotted(c.func) == "sorted"]
    if not found or len(found[0].args) != 1 or found[0].args[0].keyword is not None:
        raise Refused("no sorted(LIST) without key or reverse on the line")
    call = found[0]
    items = call.args[0].value
    if not isinstance(items, cst.List | cst.Tuple):
        raise Refused("sorted() of something other than a list of tensors written out")
    require_torch(site)
    text = cst.Module([]).code_for_node(items)
    new = cst.parse_expression(f"list(torch.sort(torch.stack({text}), stable=True).values)")
    return Patch(
        cause,
        site.line,
        site.replaced((call, new)),
        "sorted() of 0-d tensors → torch.sort of them stacked (stable, as sorted is)",
    )
