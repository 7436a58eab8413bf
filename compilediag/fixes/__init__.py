"""Fixes: the catalogue of changes, each with what it does - the fix for each graph break
(the rules, torch's registry and hints), the remedies that --try-fixes measures
(`remedies`), and the source edits of `compilediag fix` and `--apply` (`patches`, one
module per construct). What a finding says to do (its advice) is decided beside it in
`analysis/`. May import: errors, paths, fsutil, report, trace.

Every break torch 2.8+ reports carries a GB id (`GB0059`) and a gb_type (`Failed to trace
builtin operator`); torch ships the list of them, with hints, as
`torch/_dynamo/graph_break_registry.json`. `fix_for()` answers a break with a `Fix`:

1. compilediag's own fix for that GB id (`RULES`), where there is one: a specific change,
   checked against torch (the config-level ones by applying them, tests/fixes/test_fixes.py);
2. else torch's own hints for the break (the registry's, or the ones in the break text):
   the floor, for every gb_type in the registry;
3. else, for a break text of torch before 2.8 (no id, no hints), the patterns of
   `LEGACY`, which lead to the same rules;
4. else the generic advice.

The lookup goes by GB id first, then by gb_type text, then by torch's explanation text
(the registry's explanation templates), then by the legacy patterns.

A config-level fix names the torch._dynamo.config settings that apply it (`Fix.config`),
so a fix can be tried without editing the model: a value `"fn:logging.Logger.info"` is that
function, added to the setting (a set); `config_patch()` turns the mapping into arguments
for `torch._dynamo.config.patch`.

No torch import here: the registry is read from the installed torch package's folder,
found without importing torch, on first use.

The modules: `model` (Fix, the Break the rules read, the rule registry), `registry`
(torch's registry and hints), the rules by subject (`calls`, `values`, `python`; a rule
whose advice is the same text for every break of its kind is a row of `constant`),
`legacy` (torch before 2.8), and the lookup here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from compilediag.fixes import calls, constant, python, values  # noqa: F401 - they register the rules
from compilediag.fixes.legacy import LEGACY, legacy
from compilediag.fixes.model import (
    GENERIC,
    MOVES_OUT,
    REMOVES,
    RULES,
    Break,
    Fix,
    Source,
    config_patch,
    resolve_function,
)
from compilediag.fixes.registry import (
    fill,
    floor_fix,
    ids_for_explanation,
    join_hints,
    registry,
    registry_types,
)

__all__ = [
    "GENERIC", "LEGACY", "MOVES_OUT", "REMOVES", "RULES", "Break", "Fix", "Source",
    "config_fixes", "config_patch", "fix_for", "join_hints", "registry", "resolve_function",
    "table",
]  # fmt: skip

# --- the lookup ------------------------------------------------------------------------------


def _norm_id(gb_id: str | None) -> str | None:
    if not gb_id:
        return None
    m = re.fullmatch(r"(?i)gb(\d+)", gb_id.strip())
    return f"GB{m.group(1)}" if m else None


def fix_for(
    gb_id: str | None,
    gb_type: str,
    explanation: str = "",
    hints: Sequence[str] = (),
    code: str = "",
    library_file: str | None = None,
    torch_version: str = "",
) -> Fix:
    """The fix for one break: by GB id, then gb_type, then explanation, then the patterns
    of torch before 2.8; torch's hints where compilediag has no fix of its own.
    `torch_version`: the torch that broke (default: the installed one)."""
    gid = _norm_id(gb_id)
    gb_type = (gb_type or "").strip()
    ids = [gid] if gid else []
    if not ids:
        ids = list(registry_types().get(gb_type, []))
    if not ids:
        ids = ids_for_explanation(explanation)
    b = Break(ids[0] if ids else None, gb_type, explanation or "", tuple(hints), code or "",
              library_file, torch_version)  # fmt: skip
    for i in ids:
        if i in RULES:
            return RULES[i].make(replace(b, gb_id=i))
    if not ids and not hints:
        old = legacy(b)
        if old is not None:
            return old
    floor = floor_fix(ids[0] if ids else None, hints)
    return floor or GENERIC


def table() -> dict[str, Fix]:
    """Every gb_type of the installed torch's registry -> its fix (compilediag's where it
    has one, else the registry's hints). Placeholder breaks: no code, the registry's texts."""
    out: dict[str, Fix] = {}
    for gb_id, entries in registry().items():
        for e in entries:
            if e.gb_type not in out:
                out[e.gb_type] = fix_for(gb_id, e.gb_type, fill(e.explanation))
    return out


def config_fixes() -> dict[str, Fix]:
    """compilediag's config-level fixes, one per setting (for a feature that tries them)."""
    samples = {
        "GB0059": ("builtin operator `print` with argument types ['str']", 'print("x")'),
        "GB0291": ("", 'logger.info("x")'),
        "GB0007": ("Dynamo does not know how to trace the Python builtin `_warnings.warn`.",
                   'warnings.warn("x")'),
        "GB0124": ("", "v = t.item()"),
        "GB0036": ("Operator `aten.nonzero.default`'s output shape depends on input Tensor data.",
                   "idx = torch.nonzero(t)"),
        "GB0067": ("Mutating a variable from outside the scope of this HOP is not supported.",
                   "checkpoint(fn, x)"),
        "GB0123": ("Dynamo currently does not support tracing `Tensor.backward()` when "
                   "trace_autograd_ops is off.", "loss.backward()"),
        "GB9186": ("", "torch.autograd.grad(loss, w)"),
    }  # fmt: skip
    out: dict[str, Fix] = {}
    for gb_id, (explanation, code) in samples.items():
        fix = fix_for(gb_id, "", explanation, (), code)
        if fix.config:
            out[gb_id] = fix
    return out
