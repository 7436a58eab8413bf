"""A print, a log call or a warning that breaks the graph: run in eager mode only, under
`if not torch.compiler.is_compiling():`. Refused where skipping the line under compile
would skip more than the output (an argument with an effect, a result that is used)."""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst
import libcst.matchers as m

from compilediag.fixes.patches.base import Patch, Refused, Site, calls, dotted, require_torch

LOG_METHODS = frozenset(
    {"debug", "info", "warning", "warn", "error", "critical", "exception", "log"}
)
# calls a print's or a log's argument may make without an effect the guard would skip
PURE_CALLS = frozenset(
    {"len", "str", "repr", "format", "type", "round", "float", "int", "abs", "min", "max",
     "size", "dim", "numel", "mean", "sum", "std", "norm", "item", "tolist", "amax", "amin",
     "shape", "dtype", "device", "isinstance", "id", "tuple", "list", "any", "all"}
)  # fmt: skip
# cause -> whether the called name is a call of that kind, and the call in words
KINDS: dict[str, tuple[Callable[[str], bool], str]] = {
    "print": (lambda name: name == "print", "print"),
    "logging": (lambda name: name.rpartition(".")[2] in LOG_METHODS, "log call"),
    "warning": (lambda name: name in ("warnings.warn", "warn"), "warning"),
}


def guard_call(site: Site, cause: str) -> Patch:
    stmt = site.statement()
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        raise Refused("the call shares its line with other statements")
    expr = stmt.body[0]
    if not (isinstance(expr, cst.Expr) and isinstance(expr.value, cst.Call)):
        raise Refused("the call's result is used, so the line can't be skipped")
    call = expr.value
    name = dotted(call.func)
    is_kind, what = KINDS.get(cause, (lambda _: False, ""))
    if not is_kind(name):
        raise Refused(f"the line calls `{name or site.code(call.func)}`, not a {cause} call")
    for arg in call.args:
        for inner in calls(arg.value):
            if dotted(inner.func).rpartition(".")[2] not in PURE_CALLS:
                raise Refused(
                    f"an argument calls `{site.code(inner.func)}`, whose effect the guard "
                    "would skip under compile"
                )
        if m.findall(arg.value, m.NamedExpr()):
            raise Refused("an argument assigns (:=), which the guard would skip")
    require_torch(site)
    guarded = cst.If(
        test=cst.parse_expression("not torch.compiler.is_compiling()"),
        body=cst.IndentedBlock(body=[stmt.with_changes(leading_lines=[])]),
        leading_lines=stmt.leading_lines,
    )
    return Patch(
        cause, site.line, site.replaced((stmt, guarded)),
        f"the {what} runs in eager mode only (guarded by torch.compiler.is_compiling())",
    )  # fmt: skip
