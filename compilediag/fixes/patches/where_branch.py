"""A data-dependent `if` whose branches are tensors (an assignment each, or a return
each): both sides computed and one picked with `torch.where`, so the graph holds the
branch. Refused where computing both sides could differ from taking one (an effect, an
in-place change, Python truth of tensors, `torch.equal`)."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from compilediag.fixes.patches.base import Patch, Refused, Site, calls, dotted, require_torch


def _branch_value(site: Site, block: cst.BaseSuite) -> cst.BaseSmallStatement:
    if not isinstance(block, cst.IndentedBlock) or len(block.body) != 1:
        raise Refused("a branch holds more than one statement")
    line = block.body[0]
    if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
        raise Refused("a branch is not one assignment or return")
    small = line.body[0]
    value = small.value if isinstance(small, cst.Return | cst.Assign) else None
    if value is None:
        raise Refused("a branch is not one assignment or return")
    for call in calls(value):
        name = dotted(call.func)
        last = name.rpartition(".")[2]
        if last.endswith("_") and not last.endswith("__"):
            raise Refused(f"a branch changes a tensor in place ({site.code(call.func)})")
        if isinstance(call.func, cst.Name) and name not in ("abs", "min", "max", "float"):
            raise Refused(f"a branch calls `{name}()`: evaluating both sides would run its effects")
    return small


def _condition(site: Site, test: cst.BaseExpression) -> cst.BaseExpression:
    """The condition as a tensor: `.item()` and `bool()` dropped."""
    if isinstance(test, cst.Call) and dotted(test.func) == "bool" and len(test.args) == 1:
        test = test.args[0].value
    for call in calls(test):
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "item":
            test = test.deep_replace(call, call.func.value)
        elif dotted(call.func) == "torch.equal":
            raise Refused("torch.equal also compares shapes; no tensor twin is exact")
    if isinstance(test, cst.BooleanOperation) or (
        isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)
    ):
        raise Refused("the condition uses and/or/not (Python truth of tensors)")
    return test.with_changes(lpar=[], rpar=[]) if hasattr(test, "lpar") else test


def where_branch(site: Site, cause: str) -> Patch:
    stmt = site.statement()
    if not isinstance(stmt, cst.If):
        raise Refused("the patch rewrites an `if` statement with torch.where; this line is none")
    if stmt.orelse is not None and not isinstance(stmt.orelse, cst.Else):
        raise Refused("the `if` has an elif")
    require_torch(site)
    cond = cst.Module([]).code_for_node(_condition(site, stmt.test))
    yes = _branch_value(site, stmt.body)
    fn = site.function(stmt)
    if isinstance(yes, cst.Return):
        return _where_return(site, stmt, yes, cond, cause, fn)
    assert isinstance(yes, cst.Assign)
    if len(yes.targets) != 1 or not isinstance(yes.targets[0].target, cst.Name):
        raise Refused("the branch assigns more than one name")
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
            raise Refused("the branches assign different names")
        other = cst.Module([]).code_for_node(no.value)
    true = cst.Module([]).code_for_node(yes.value)
    new = _as_line(f"{name} = torch.where({cond}, {true}, {other})\n", stmt)
    return Patch(
        cause, site.line, site.replaced((stmt, new)),
        "the branch is computed on both sides and picked with torch.where",
    )  # fmt: skip


END_COMMENT_WITHIN = 88  # a statement and its end comment, before their indentation


def _as_line(text: str, stmt: cst.If, *removed: cst.CSTNode) -> cst.SimpleStatementLine:
    """One statement in place of the `if` (and `removed`, the return after it): its blank
    lines above, and every comment the replaced lines held - the header's, or where it has
    none the one comment of a branch, at its end; the others on lines above it (a look saw
    `pooled = pooled * 1.0  # padded batch` lose its comment)."""
    new = cst.parse_statement(text)
    assert isinstance(new, cst.SimpleStatementLine)
    header = stmt.body.header if isinstance(stmt.body, cst.IndentedBlock) else None
    comments = _comments(getattr(stmt.body, "body", []))
    if stmt.orelse is not None:
        else_header = getattr(stmt.orelse.body, "header", None)
        comments += [else_header.comment] if else_header and else_header.comment else []
        comments += _comments(getattr(stmt.orelse.body, "body", []))
    comments += _comments(removed)
    if header is not None and header.comment:
        comments.append(header.comment)  # the header's at the end (its own spaces dropped)
    trailing = new.trailing_whitespace
    # at the end where the line stays short (a look's was 126 columns, the `if`'s
    # alignment kept); else on a line of its own above
    if comments and len(text) + 2 + len(comments[-1].value) <= END_COMMENT_WITHIN:
        trailing = trailing.with_changes(
            whitespace=cst.SimpleWhitespace("  "), comment=comments.pop()
        )
    above = [cst.EmptyLine(indent=True, comment=c) for c in comments]
    return new.with_changes(
        leading_lines=[*stmt.leading_lines, *above], trailing_whitespace=trailing
    )


def _comments(lines: Sequence[cst.CSTNode]) -> list[cst.Comment]:
    """The comments of a branch's statements: on lines of their own above them, and at
    their ends."""
    out: list[cst.Comment] = []
    for line in lines:
        out += [e.comment for e in getattr(line, "leading_lines", []) if e.comment]
        end = getattr(line, "trailing_whitespace", None)
        if end is not None and end.comment:
            out.append(end.comment)
    return out


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
            raise Refused("the `if` returns, and what follows it is not one return")
        no, after = nxt.body[0], nxt
        _branch_value(site, cst.IndentedBlock(body=[nxt]))
    if not isinstance(no, cst.Return) or yes.value is None or no.value is None:
        raise Refused("one branch returns and the other does not")
    code = cst.Module([]).code_for_node
    true, false = code(yes.value), code(no.value)
    if "," in true or "," in false:
        raise Refused("a branch returns several values")
    removed = [after] if after is not None else []
    new = _as_line(f"return torch.where({cond}, {true}, {false})\n", stmt, *removed)
    if after is None:
        return Patch(
            cause, site.line, site.replaced((stmt, new)),
            "both returns are computed and picked with torch.where",
        )  # fmt: skip
    return Patch(
        cause, site.line, site.replaced((stmt, new), (after, cst.RemoveFromParent())),
        "both returns are computed and picked with torch.where",
    )  # fmt: skip
