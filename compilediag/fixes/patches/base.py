"""What every patch family shares: the result (`Patch` or, through `Refused`, a
`NoPatch`), the parsed file with its nodes' positions and parents (`Site`), and the few
questions of the syntax tree the families ask alike."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import libcst as cst
import libcst.matchers as m
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider

from compilediag.errors import does_not_parse


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


class Refused(Exception):
    """Why a construct's rewrite is not offered here."""


def parse(source: str, path: str = "the file") -> cst.Module:
    """The file's syntax tree; one line naming where it does not parse."""
    import ast

    try:  # Python's own parser names the line the user sees
        ast.parse(source)
    except SyntaxError as e:
        raise does_not_parse(path, e.lineno, e.msg, EDITS) from None
    try:
        return cst.parse_module(source)
    except cst.ParserSyntaxError as e:
        raise does_not_parse(path, e.raw_line, e.message, EDITS) from None


EDITS = "compilediag fix edits only a file Python reads"


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
            raise Refused(f"no statement starts at line {self.line}")
        return found[-1]

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.parents.get(node)

    def function(self, node: cst.CSTNode) -> cst.FunctionDef:
        p: cst.CSTNode | None = node
        while p is not None and not isinstance(p, cst.FunctionDef):
            p = self.parent(p)
        if p is None:
            raise Refused("the line is not inside a function")
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
            if not self.inside(node, fn):
                continue
            parent = self.parent(node)
            if isinstance(parent, cst.Attribute) and parent.attr is node:
                continue
            if isinstance(parent, cst.Arg) and parent.keyword is node:
                continue
            if isinstance(parent, cst.AssignTarget | cst.AugAssign) or (
                isinstance(parent, cst.For) and parent.target is node
            ):
                raise Refused(f"`{name}` is assigned again at line {p.start.line}")
            yield node

    def inside(self, node: cst.CSTNode, outer: cst.CSTNode) -> bool:
        p: cst.CSTNode | None = node
        while p is not None:
            if p is outer:
                return True
            p = self.parent(p)
        return False


def dotted(node: cst.BaseExpression) -> str:
    """A name or a chain of attributes on one (`torch.nonzero`); '' for anything else.
    Not libcst's `get_full_name_for_node`: that reads through calls and subscripts
    (`make().info` is `make.info`, `(a + b).sum` is `None.sum`), which would let the
    families take a call on a computed value for a known function."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr.value}" if base else ""
    return ""


def mentions(node: cst.CSTNode, names: set[str]) -> bool:
    return bool(m.findall(node, m.Name(m.MatchIfTrue(names.__contains__))))


def literal(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.UnaryOperation):
        return literal(node.expression)
    return isinstance(node, cst.Integer | cst.Float | cst.Imaginary | cst.SimpleString)


def calls(node: cst.CSTNode) -> list[cst.Call]:
    """Every call in the node, outermost first."""
    return [c for c in m.findall(node, m.Call()) if isinstance(c, cst.Call)]


def require_torch(site: Site) -> None:
    """The file imports torch as `torch`, for the rewrite's `torch.` names to use."""
    for stmt in site.module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for s in stmt.body:
                if isinstance(s, cst.Import) and any(
                    dotted(a.name) == "torch" and a.asname is None for a in s.names
                ):
                    return
    raise Refused("the file has no `import torch` for the rewrite to use")
