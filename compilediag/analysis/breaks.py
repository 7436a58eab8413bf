"""Graph breaks: parse torch's break text, find the user's line, classify, advise, de-duplicate."""

from __future__ import annotations

import re

from compilediag.analysis.source import code_at, context_at
from compilediag.report import GraphBreak, Site
from compilediag.torch_formats import ParsedBreak, is_library_file, parse_break_text
from compilediag.trace import Compile


def user_site(parsed: ParsedBreak) -> tuple[Site, Site | None]:
    """The user's own line, and the library frame beneath it when the break is in a library."""
    frames = parsed.frames or ([parsed.location] if parsed.location else [])
    if not frames:
        return Site("<unknown>", 0), None
    inner = frames[-1]
    if not is_library_file(inner.file):
        return inner, None
    mine = [f for f in frames if not is_library_file(f.file)]
    return (mine[-1], inner) if mine else (inner, None)


# --- causes and advice ----------------------------------------------------------------

# (cause, pattern over reason + explanation + code, suggestion). First match wins.
CAUSES: list[tuple[str, re.Pattern[str], str]] = [
    (
        "print",
        re.compile(r"builtin operator `?print|BuiltinVariable\(print\)|\bprint\("),
        "Remove the print from the compiled code, or guard it with "
        "`if not torch.compiler.is_compiling():`. To keep it, add `print` to "
        "torch._dynamo.config.reorderable_logging_functions (it then runs after the graph).",
    ),
    (
        "logging",
        re.compile(r"logging|Logger|\blog(ger)?\.(info|debug|warning|error)\(", re.I),
        "Move the logging call out of forward, or add the logger method to "
        "torch._dynamo.config.reorderable_logging_functions so it runs after the graph.",
    ),
    (
        "data_dependent_branch",
        re.compile(r"[Dd]ata-dependent (branching|jump)|generic_jump|attempted to jump with"),
        "Make the branch tensor-valued: compute both sides and pick with torch.where(cond, a, b), "
        "or use torch.cond(pred, true_fn, false_fn, operands) for real control flow.",
    ),
    (
        "item",
        re.compile(r"Tensor\.item|\.item\(\)|\bitem\b.*scalar|capture_scalar_outputs"),
        "Keep the value as a 0-d tensor instead of calling .item(), or set "
        "torch._dynamo.config.capture_scalar_outputs = True so it is traced.",
    ),
    (
        "tolist",
        re.compile(r"tolist"),
        "Avoid .tolist() inside forward: keep the tensor, or move the conversion outside "
        "the compiled function.",
    ),
    (
        "numpy",
        re.compile(r"numpy|\.numpy\(\)|ndarray", re.I),
        "Dynamo maps NumPy calls to torch ops, but not this one: use the torch op instead "
        "(e.g. torch.argsort for np.lexsort), or move this step out of forward.",
    ),
    (
        "dynamic_output_shape",
        re.compile(r"dynamic output shape|nonzero|masked_select|unique|capture_dynamic_output"),
        "The op's output size depends on data. Prefer a fixed-size form (torch.where(mask, x, 0), "
        "masking instead of indexing), or set "
        "torch._dynamo.config.capture_dynamic_output_shape_ops = True.",
    ),
    (
        "compiler_disable",
        re.compile(r"torch\.compiler\.disable|disabled function|skip_frame|_disable_dynamo"),
        "This call is marked torch.compiler.disable, so Dynamo must stop the graph around it. "
        "Remove the decorator if the function is traceable, or call it outside the model.",
    ),
    (
        "unsupported_call",
        re.compile(
            r"C extension|builtin_function_or_method|[Uu]nsupported (function|method|builtin)"
            r"|call_function|Attempted to call function marked as skipped|non-torch function"
        ),
        "Dynamo cannot trace this function. Wrap it as a custom op "
        "(torch.library.custom_op) so it stays in the graph, or move it out of forward.",
    ),
]


def classify(reason: str, explanation: str, code: str) -> tuple[str, str]:
    text = " ".join((reason, explanation, code))
    for cause, pattern, suggestion in CAUSES:
        if pattern.search(text):
            return cause, suggestion
    return "other", "See the explanation and hints above, and the linked page where there is one."


# --- de-duplication -------------------------------------------------------------------


def collect_breaks(compiles: list[Compile]) -> tuple[list[GraphBreak], int]:
    """Every break site once, counted, in order of impact; and the total occurrences."""
    sites: dict[tuple[str, int, str], GraphBreak] = {}
    total = 0
    for c in compiles:
        for logged in c.graph_breaks:
            total += 1
            parsed = parse_break_text(logged.text)
            site, lib = user_site(parsed)
            code = site.code or code_at(site.file, site.line)
            key = (site.file, site.line, parsed.reason)
            if key in sites:
                gb = sites[key]
                gb.count += 1
                if c.compile_id not in gb.compile_ids:
                    gb.compile_ids.append(c.compile_id)
                continue
            lib_code = ""
            if lib is not None:
                lib_code = lib.code or code_at(lib.file, lib.line)
            cause, suggestion = classify(parsed.reason, parsed.explanation, code + " " + lib_code)
            sites[key] = GraphBreak(
                file=site.file,
                line=site.line,
                code=code,
                reason=parsed.reason,
                gb_id=parsed.gb_id,
                doc_url=parsed.doc_url,
                explanation=parsed.explanation,
                hints=parsed.hints,
                suggestion=suggestion,
                cause=cause,
                library_frame=Site(lib.file, lib.line, lib_code, lib.name) if lib else None,
                compile_ids=[c.compile_id],
                ops_before=c.metrics.graph_op_count,
                context=context_at(site.file, site.line),
            )
    ordered = sorted(sites.values(), key=lambda b: (-b.count, -b.ops_before, b.file, b.line))
    return ordered, total
