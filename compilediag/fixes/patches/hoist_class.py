"""A class statement inside forward (a new class object on every call): defined once at
module level, above the function that held it. Refused where the class reads that
function's locals, or the module already has the name."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from compilediag.fixes.patches.base import Patch, Refused, Site


def hoist_class(site: Site, cause: str) -> Patch:
    stmt = site.statement()
    if not isinstance(stmt, cst.ClassDef):
        raise Refused("the break's line is not a class statement")
    fn = site.function(stmt)
    local = {p.name.value for p in fn.params.params}
    inner = {id(n) for n in _binding(stmt)}
    local |= {
        n.target.value
        for n in _binding(fn.body)
        if id(n) not in inner and isinstance(n.target, cst.Name)
    }
    used = {n.value for n in m.findall(stmt, m.Name()) if isinstance(n, cst.Name)}
    if used & local:
        raise Refused(f"the class uses forward's locals ({', '.join(sorted(used & local))})")
    top: cst.CSTNode = fn
    while not isinstance(site.parent(top), cst.Module):
        top = site.parent(top)  # type: ignore[assignment]
    name = stmt.name.value
    if any(
        isinstance(s, cst.ClassDef | cst.FunctionDef) and s.name.value == name
        for s in site.module.body
    ):
        raise Refused(f"the module already defines {name}")
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


def _binding(node: cst.CSTNode) -> list[cst.AssignTarget | cst.For]:
    """The assignments and for loops in the node (what binds a local name)."""
    return [
        n for n in m.findall(node, m.AssignTarget() | m.For())
        if isinstance(n, cst.AssignTarget | cst.For)
    ]  # fmt: skip
