"""NumPy on a tensor's `.numpy()` copy: the torch function with the same result
(`np.percentile` -> `torch.quantile`, `np.lexsort` -> stable argsorts), and the bytes of a
tensor counted without the copy. Only the functions and arguments whose twin is exact."""

from __future__ import annotations

import libcst as cst

from compilediag.fixes.patches.base import Patch, Refused, Site, calls, dotted, require_torch

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
# a node's code as written, wherever it stands
CODE = cst.Module([]).code_for_node


def numpy_twin(site: Site, cause: str) -> Patch:
    stmt = site.statement()
    require_torch(site)
    found = [c for c in site.nodes(cst.Call) if dotted(c.func).startswith(("np.", "numpy."))]
    if not found:
        return _byte_count(site, stmt, cause)
    call = found[0]
    fname = dotted(call.func).rpartition(".")[2]
    if fname not in NUMPY_TWINS:
        raise Refused(f"np.{fname} has no torch twin compilediag knows")
    text, helper = _twin(site, call, fname)
    pairs = [(call, cst.parse_expression(text)), *_conversions(site, stmt)]
    new = site.replaced(*pairs)
    if helper:
        new = new.rstrip("\n") + "\n" + helper
    return Patch(
        cause, site.line, new, f"np.{fname} on the tensor's NumPy copy → {text.split('(')[0]}"
    )


def _twin(site: Site, call: cst.Call, fname: str) -> tuple[str, str]:
    """The torch call for `np.fname(t.numpy(), ...)`, and the helper it needs in the file
    ('' for none)."""
    numpys = [
        c for c in calls(call)
        if isinstance(c.func, cst.Attribute) and c.func.attr.value == "numpy" and not c.args
    ]  # fmt: skip
    if not numpys:
        raise Refused(f"np.{fname}'s argument does not come from a tensor's .numpy()")
    new_call: cst.BaseExpression = call
    for n in numpys:
        assert isinstance(n.func, cst.Attribute)
        new_call = new_call.deep_replace(n, n.func.value)
    assert isinstance(new_call, cst.Call)
    args = list(new_call.args)
    kw = {a.keyword.value: a for a in args if a.keyword is not None}
    pos = [a for a in args if a.keyword is None]
    if set(kw) - {"axis", "keepdims", "ddof", "q", "a_min", "a_max"}:
        raise Refused(f"np.{fname} is called with {', '.join(sorted(kw))}")
    if fname != "lexsort":
        return f"{NUMPY_TWINS[fname]}({', '.join(_twin_arguments(fname, pos, kw))})", ""
    if len(args) != 1 or kw:
        raise Refused("np.lexsort with an axis")
    text = f"_compilediag_lexsort({CODE(pos[0].value)})"
    return text, LEXSORT_HELPER if "_compilediag_lexsort" not in site.module.code else ""


def _twin_arguments(fname: str, pos: list[cst.Arg], kw: dict[str, cst.Arg]) -> list[str]:
    """The torch function's arguments: NumPy's q, axis, keepdims and ddof in torch's terms
    (a percentile over 100, dim, keepdim, correction); any other keyword is refused."""
    parts = [CODE(a.value) for a in pos]
    if fname in ("percentile", "quantile", "median"):
        if fname == "median":
            parts.append("0.5")
        elif len(parts) != 2:
            raise Refused(f"np.{fname} without q")
        elif fname == "percentile":
            parts[1] = f"{parts[1]} / 100"
        parts[1] = f"torch.as_tensor({parts[1]}, dtype={parts[0]}.dtype)"
    if fname == "clip":
        lo = kw.pop("a_min", None)
        hi = kw.pop("a_max", None)
        if lo is not None or hi is not None:
            parts += [CODE(x.value) if x else "None" for x in (lo, hi)]
    if "axis" in kw:
        parts.append(f"dim={CODE(kw.pop('axis').value)}")
    if "keepdims" in kw:
        parts.append(f"keepdim={CODE(kw.pop('keepdims').value)}")
    if fname in ("std", "var"):
        ddof = kw.pop("ddof", None)
        parts.append(f"correction={CODE(ddof.value) if ddof else '0'}")
    if kw:
        raise Refused(f"np.{fname} is called with {', '.join(sorted(kw))}")
    return parts


def _conversions(site: Site, stmt: cst.CSTNode) -> list[tuple[cst.CSTNode, cst.CSTNode]]:
    """`torch.from_numpy(r)` (or `as_tensor`, `tensor`) of the name the line assigns: the
    name itself, now that it holds a tensor."""
    assign = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) else None
    if not (isinstance(assign, cst.Assign) and len(assign.targets) == 1):
        return []
    target = assign.targets[0].target
    if not isinstance(target, cst.Name):
        return []
    pairs: list[tuple[cst.CSTNode, cst.CSTNode]] = []
    for use in site.names_in(site.function(stmt), target.value, site.line):
        arg = site.parent(use)
        conv = site.parent(arg) if isinstance(arg, cst.Arg) else None
        if isinstance(conv, cst.Call) and dotted(conv.func) in (
            "torch.from_numpy", "torch.as_tensor", "torch.tensor",
        ):  # fmt: skip
            pairs.append((conv, cst.Name(target.value)))
    return pairs


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
        raise Refused("no NumPy function on the line (an ndarray method has no torch twin here)")
    name = assign.targets[0].target.value
    tensor = CODE(inner.func.value)
    count = f"{name}_nbytes"
    if count in site.module.code:
        raise Refused(f"the name {count} is taken")
    pairs: list[tuple[cst.CSTNode, cst.CSTNode]] = []
    for use in site.names_in(site.function(stmt), name, site.line):
        arg = site.parent(use)
        call = site.parent(arg) if isinstance(arg, cst.Arg) else None
        if not (isinstance(call, cst.Call) and dotted(call.func) == "len"):
            raise Refused(f"line {site.start(use)}: the bytes themselves are used, not their count")
        pairs.append((call, cst.Name(count)))
    new = cst.parse_statement(f"{count} = {tensor}.numel() * {tensor}.element_size()\n")
    assert isinstance(new, cst.SimpleStatementLine)
    pairs.append((stmt, stmt.with_changes(body=new.body)))
    return Patch(
        cause, site.line, site.replaced(*pairs),
        "len() of a tensor's bytes → numel() * element_size() (no NumPy copy)",
    )  # fmt: skip
