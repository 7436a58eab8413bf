"""Where a value that was a Python number flows once a rewrite keeps it a 0-d tensor: the
check that `.item()`, `.tolist()` and `nonzero()` patches share, refusing wherever the
tensor would behave otherwise (a count, a size, an index, a condition)."""

from __future__ import annotations

import libcst as cst

from compilediag.fixes.patches.base import Refused, Site, dotted, literal, mentions

# builtins that take a Python number as a count, a size or an index
NUMBER_CALLS = frozenset(
    {"range", "int", "len", "bool", "str", "repr", "round", "list", "tuple", "float",
     "print", "format", "enumerate", "zip", "divmod", "hex", "chr", "slice", "isinstance"}
)  # fmt: skip
# what a use as a Python number is, by the node that holds the value
NUMBER_USES: dict[type, str] = {
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
            raise Refused("the value flows too far to follow")
        mixed = False
        parent = site.parent(node)
        while isinstance(parent, cst.BinaryOperation | cst.UnaryOperation):
            if isinstance(parent, cst.BinaryOperation):
                other = parent.right if parent.left is node else parent.left
                mixed |= not literal(other) and not mentions(other, tainted)
            node, parent = parent, site.parent(parent)
        line = site.start(node)
        text = site.code(node)
        if isinstance(parent, cst.Assign) and parent.value is node:
            if mixed:
                continue
            targets = [t.target for t in parent.targets]
            if len(targets) != 1 or not isinstance(targets[0], cst.Name):
                raise Refused(f"line {line}: the value is unpacked or stored ({text})")
            name = targets[0].value
            tainted.add(name)
            work.extend(site.names_in(fn, name, site.start(parent)))
            continue
        if mixed and isinstance(parent, cst.Return | cst.Arg):
            call = site.parent(parent) if isinstance(parent, cst.Arg) else None
            if isinstance(call, cst.Call) and dotted(call.func) in NUMBER_CALLS:
                raise Refused(
                    f"line {line}: `{site.code(call)}` takes a Python number, not a tensor"
                )
            continue
        raise Refused(
            f"line {line}: `{text}` is {number_use(site, parent)}; as a tensor it would change "
            "what that line does"
        )


def number_use(site: Site, parent: cst.CSTNode | None) -> str:
    """What the node holding the value makes of it, in words."""
    said = next((w for k, w in NUMBER_USES.items() if isinstance(parent, k)), "used as a number")
    if isinstance(parent, cst.Arg):
        call = site.parent(parent)
        if isinstance(call, cst.Call) and dotted(call.func) in NUMBER_CALLS:
            said = f"given to {site.code(call.func)}(), which takes a Python number"
    return said
