"""`compilediag fix`: a minimal source edit for a graph break whose cause compilediag
knows, made with libcst so that comments and formatting stay as they are.

Pure rewriting: no torch, nothing run. `propose(source, line, cause)` gives a `Patch` (the
whole file's new text and what the edit does) or a `NoPatch` (why not). Each construct is
one small function over the statement at the break's line, in a module of its own (as
LibCST's codemods are: `guard_call`, `keep_tensor`, `where_branch`, `count_nonzero`,
`numpy_twin`, `sort_stacked`, `clone_copy`, `hoist_class`) on the shared `base`; each
refuses, with the reason, where its rewrite could change what the code computes (a Python
number used as a size, a branch with an effect, a print argument with one). What a patch
gives is then verified by running it (cli/commands/fix.py): torch's own counts, outputs,
time; `results` holds what the command found.
"""

from __future__ import annotations

from collections.abc import Callable

from compilediag.fixes.patches.base import NoPatch, Patch, Refused, Site, parse
from compilediag.fixes.patches.clone_copy import clone_copy
from compilediag.fixes.patches.count_nonzero import count_nonzero
from compilediag.fixes.patches.guard_call import guard_call
from compilediag.fixes.patches.hoist_class import hoist_class
from compilediag.fixes.patches.keep_tensor import keep_tensor
from compilediag.fixes.patches.numpy_twin import numpy_twin
from compilediag.fixes.patches.results import BreakFix, Evidence, FixResult, RecompileFix
from compilediag.fixes.patches.sort_stacked import sort_stacked
from compilediag.fixes.patches.where_branch import where_branch
from compilediag.report.vocabulary import BreakCause

__all__ = [
    "CONSTRUCTS", "BreakFix", "Evidence", "FixResult", "NoPatch", "Patch", "RecompileFix",
    "parse", "propose",
]  # fmt: skip

# cause -> the construct that rewrites it
CONSTRUCTS: dict[BreakCause, Callable[[Site, str], Patch]] = {
    BreakCause.PRINT: guard_call,
    BreakCause.LOGGING: guard_call,
    BreakCause.WARNING: guard_call,
    BreakCause.ITEM: keep_tensor,
    BreakCause.TOLIST: keep_tensor,
    BreakCause.ITEM_BRANCH: where_branch,
    BreakCause.DATA_DEPENDENT_BRANCH: where_branch,
    BreakCause.DATA_DEPENDENT_OP: where_branch,
    BreakCause.DYNAMIC_OUTPUT_SHAPE: count_nonzero,
    BreakCause.NUMPY: numpy_twin,
    BreakCause.SORT_TENSORS: sort_stacked,
    BreakCause.COPY_TENSOR: clone_copy,
    BreakCause.CLASS_DEFINITION: hoist_class,
}


def propose(source: str, line: int, cause: BreakCause, path: str = "the file") -> Patch | NoPatch:
    """A rewrite of the file for the break at `line`, or why there is none. A file that
    does not parse raises UsageError (its line)."""
    site = Site(source, line, path)
    construct = CONSTRUCTS.get(cause)
    if construct is None:
        return NoPatch(cause, line, f"no code rewrite is known for this cause ({cause or 'other'})")
    try:
        patch = construct(site, cause)
    except Refused as why:
        return NoPatch(cause, line, str(why))
    try:
        compile(patch.text, path, "exec")
    except SyntaxError as e:  # a bug of a construct: never offered
        return NoPatch(cause, line, f"the rewrite did not parse ({e.msg})")
    return patch
