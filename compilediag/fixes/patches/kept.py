"""`run --try-fixes --apply` (`fix --apply REPORT.json`): the remedies --try-fixes kept,
written into the job's code where the object is made, as the bootstrap made them in its
runs: a keyword at the constructor's call (the optimizer's `fused=True`, the DataLoader's
workers, `mode="reduce-overhead"` at torch.compile), or a setting after the imports of the
job's script (TF32, Dynamo's capture settings). Pure rewriting: no torch, nothing run;
each edit refuses, with the reason, where the line no longer holds the call it was made
at (the file changed since the run)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from compilediag.fixes.patches.base import Refused, Site, dotted

# a remedy made as a setting: the statement written after the imports
SETTINGS = {
    "tf32": 'torch.set_float32_matmul_precision("high")',
    "scalars": "torch._dynamo.config.capture_scalar_outputs = True",
    "dynamic_ops": "torch._dynamo.config.capture_dynamic_output_shape_ops = True",
}
# CUDA graphs: the keyword at the torch.compile call (the bootstrap's config setting is
# what this mode turns on)
COMPILE_MODE = {"mode": '"reduce-overhead"'}
# keywords a remedy's keyword replaces (fused=True with foreach=True is refused by torch)
DROPS = {"fused": ("foreach",)}


@dataclass(frozen=True)
class Edit:
    """One kept remedy's edit: the file, its new text, and what it does, in words."""

    path: str
    text: str
    what: str


def keywords_of(code: str) -> dict[str, str]:
    """The keywords the bootstrap gave a constructor, from its words:
    `DataLoader(..., num_workers=2, persistent_workers=True)` -> {num_workers: "2", ...}."""
    return dict(re.findall(r"(\w+)=([^,()]+)", code.partition("(")[2]))


def callee_of(code: str) -> str:
    """`DataLoader(..., ...)` -> DataLoader."""
    head = code.partition("(")[0].strip()
    return head.rsplit(".", 1)[-1]


def at_call(source: str, path: str, line: int, callee: str, keywords: dict[str, str]) -> str:
    """The file with `keywords` given to the call of `callee` that starts at `line` (each
    replacing the same keyword where the call has it, and those DROPS names)."""
    site = Site(source, line, path)
    calls = [c for c in site.nodes(cst.Call) if dotted(c.func).rsplit(".", 1)[-1] == callee]
    if not calls:
        raise Refused(
            f"no call of {callee}() starts at line {line} (the file changed since the run?)"
        )
    call = calls[0]
    drop = set(keywords) | {d for k in keywords for d in DROPS.get(k, ())}
    args = [a for a in call.args if not (a.keyword is not None and a.keyword.value in drop)]
    if args:  # the last argument's own trailing comma, if any, stays a separator
        args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    for key, value in keywords.items():
        args.append(
            cst.Arg(
                keyword=cst.Name(key),
                value=cst.parse_expression(value),
                equal=cst.AssignEqual(
                    whitespace_before=cst.SimpleWhitespace(""),
                    whitespace_after=cst.SimpleWhitespace(""),
                ),
            )
        )
    return site.replaced((call, call.with_changes(args=args)))


def after_imports(source: str, path: str, statement: str) -> str:
    """The file with `statement` after its last top-level import (unchanged where it holds
    the statement already)."""
    site = Site(source, 1, path)
    module = site.module
    if any(site.code(s) == statement for s in module.body):
        return source
    last = max(
        (i for i, s in enumerate(module.body)
         if isinstance(s, cst.SimpleStatementLine)
         and any(isinstance(x, cst.Import | cst.ImportFrom) for x in s.body)),
        default=None,
    )  # fmt: skip
    if last is None:
        raise Refused(f"{path} imports nothing at its top level: no place for {statement}")
    body = list(module.body)
    body.insert(last + 1, cst.parse_statement(statement + "\n"))
    return module.with_changes(body=body).code
