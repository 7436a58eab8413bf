"""Break texts of torch before 2.8 (no GB id, no gb_type, no hints): patterns that
lead to the same rules."""

from __future__ import annotations

import re
from dataclasses import replace

from compilediag.fixes.model import RULES, Break, Fix
from compilediag.fixes.values import ndarray

# --- torch before 2.8: no GB id, no gb_type, no hints ------------------------------------------

# (pattern over reason + explanation + code, GB id of the rule that answers). First match wins.
LEGACY: list[tuple[re.Pattern[str], str]] = [
    (
        re.compile(
            r"skip function graph_break|torch\._dynamo\.graph_break\(\)|User-inserted graph break"
        ),
        "GB0025",
    ),
    (
        re.compile(r"builtin operator `?print|BuiltinVariable\(print\)|builtin: print|\bprint\("),
        "GB0059",
    ),
    (re.compile(r"logging|Logger|\blog(ger)?\.(info|debug|warning|error)\(", re.I), "GB0291"),
    (re.compile(r"\bwarnings\.warn\(|_warnings"), "GB0007"),
    (
        re.compile(r"[Dd]ata-dependent (branching|jump)|generic_jump|attempted to jump with"),
        "GB0170",
    ),
    (re.compile(r"_local_scalar_dense"), "GB0033"),
    (re.compile(r"Tensor\.item|\.item\(\)|\bitem\b.*scalar|capture_scalar_outputs"), "GB0124"),
    (re.compile(r"tolist"), "GB0109"),
    (re.compile(r"ndarray|\.numpy\(\)|numpy", re.I), "GB0294"),
    (
        re.compile(
            r"dynamic output shape|dynamic shape operator|nonzero|masked_select|unique|capture_dynamic_output",
            re.I,
        ),
        "GB0036",
    ),
    (
        re.compile(r"torch\.compiler\.disable|disabled function|skip_frame|_disable_dynamo"),
        "GB0098",
    ),
    (
        re.compile(
            r"Attempted to call function marked as skipped|skip function|C extension"
            r"|builtin_function_or_method|non-torch function"
        ),
        "GB0007",
    ),
    (re.compile(r"[Uu]nsupported (function|method|builtin)|call_function"), "GB0156"),
]


def legacy(b: Break) -> Fix | None:
    for pattern, gb_id in LEGACY:
        if pattern.search(b.text):
            if gb_id == "GB0294" and "ndarray" in b.text and "ndarray." in b.explanation:
                return ndarray(b)
            return RULES[gb_id].make(replace(b, gb_id=None))
    return None
