"""Graph breaks: parse torch's break text, find the user's line, classify, advise, de-duplicate."""

from __future__ import annotations

import re

from compilediag.analysis.source import code_at, context_at
from compilediag.report import GraphBreak, Site
from compilediag.torch_formats import RESUME, ParsedBreak, is_library_file, parse_break_text
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
        "explicit_graph_break",
        re.compile(r"torch\._dynamo\.graph_break\(\)|User-inserted graph break"),
        "This break is on purpose: remove the torch._dynamo.graph_break() call to let Dynamo "
        "trace through it (keep it only if the code after it can't be compiled).",
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


# Code the user calls but does not own: a break inside it is theirs to avoid, not to fix
# inside. Matched on the path from the package down; the advice fits the framework.
FRAMEWORKS: list[tuple[str, str, str]] = [
    (
        "torch/nn/parallel/",
        "torch.nn.parallel (DDP)",
        "Dynamo broke inside DistributedDataParallel's own code. Compile the module, then "
        "wrap it (`DDP(torch.compile(model))`), or compile each block; torch's DDP notes "
        "describe how DDP and torch.compile work together.",
    ),
    (
        "torch/",
        "torch",
        "The break is inside torch itself, under your call: check the call's arguments, or "
        "keep that call outside the compiled function.",
    ),
    (
        "logging/",
        "logging",
        "Dynamo does not trace the logging module: move the call out of forward, guard it "
        "with `if not torch.compiler.is_compiling():`, or add the logger method to "
        "torch._dynamo.config.ignore_logging_functions.",
    ),
    (
        "contextlib.py",
        "contextlib",
        "A context manager Dynamo cannot trace: move the `with` block out of forward, or use "
        "one Dynamo supports (torch.no_grad, torch.autocast, ...).",
    ),
    (
        "transformers/",
        "transformers",
        "The break is inside transformers' own code: look for a config option that avoids "
        "that path (e.g. attn_implementation, use_cache, output_attentions), or compile the "
        "inner model rather than its wrapper.",
    ),
]


def framework_of(file: str) -> tuple[str, str] | None:
    path = file.replace("\\", "/")
    for marker, name, advice in FRAMEWORKS:
        if marker in path:
            return name, advice
    return None


def restarts(compiles: list[Compile]) -> list[tuple[Compile, Site, str]]:
    """Breaks of a trace that logs no break artifact (older layouts): every resume frame
    Dynamo made (`torch_dynamo_resume_in_f_at_9`) stands for a break at that line, and the
    compile that broke there may say why in its `restart_reasons`."""
    if any(c.graph_breaks for c in compiles):
        return []
    out = []
    for k in compiles:
        r = RESUME.match(k.metrics.co_name)
        if not r or k.id.frame_compile:  # one break per resume frame, not per recompile
            continue
        line, file = int(r["line"]), k.metrics.co_filename
        # the compile that broke: a frame of the same function that starts before the line
        broke = [
            c for c in compiles
            if c.metrics.co_filename == file and c.id.frame_compile == 0
            and (c.metrics.co_name == r["fn"] or _resumes(c.metrics.co_name, r["fn"], line))
        ]  # fmt: skip
        c = broke[-1] if broke else k
        reasons = c.metrics.restart_reasons or [
            "graph break (this trace records only the function torch resumed after it)"
        ]
        out.append((c, Site(file, line), reasons[0].strip().strip("'\"")))
    return out


def _resumes(co_name: str, fn: str, before: int) -> bool:
    m = RESUME.match(co_name)
    return m is not None and m["fn"] == fn and int(m["line"]) < before


def collect_breaks(compiles: list[Compile]) -> tuple[list[GraphBreak], int]:
    """Every finding once, and how many times a graph was broken.

    A finding is a user site and the library site under it (each library site its own
    finding), with its reason. Its `count` is the number of compiles it happened in: torch
    logs a break again on the restart of the same compile (another attempt), and each
    outer frame may report it; those are one. The total counts (compile, user site) pairs.
    """
    sites: dict[tuple[str, int, str, str, int], GraphBreak] = {}
    broken: set[tuple[str, str, int]] = set()
    for c in compiles:
        for logged in c.graph_breaks:
            parsed = parse_break_text(logged.text)
            site, lib = user_site(parsed)
            broken.add((c.compile_id, site.file, site.line))
            key = (
                site.file,
                site.line,
                parsed.reason,
                lib.file if lib else "",
                lib.line if lib else 0,
            )
            if key in sites:
                gb = sites[key]
                if c.compile_id not in gb.compile_ids:
                    gb.compile_ids.append(c.compile_id)
                    gb.count += 1
                continue
            code = site.code or code_at(site.file, site.line)
            lib_code = ""
            if lib is not None:
                lib_code = lib.code or code_at(lib.file, lib.line)
            cause, suggestion = classify(parsed.reason, parsed.explanation, code + " " + lib_code)
            framework = framework_of(lib.file) if lib is not None else None
            if framework is not None and cause in ("other", "unsupported_call"):
                suggestion = framework[1]
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
                framework=framework[0] if framework else "",
                compile_ids=[c.compile_id],
                ops_before=c.metrics.graph_op_count,
                context=context_at(site.file, site.line),
            )
    for c, site, reason in restarts(compiles):
        broken.add((c.compile_id, site.file, site.line))
        key = (site.file, site.line, reason, "", 0)
        if key in sites:
            if c.compile_id not in sites[key].compile_ids:
                sites[key].compile_ids.append(c.compile_id)
                sites[key].count += 1
            continue
        code = code_at(site.file, site.line)
        cause, suggestion = classify(reason, "", code)
        sites[key] = GraphBreak(
            file=site.file, line=site.line, code=code, reason=reason, suggestion=suggestion,
            cause=cause, compile_ids=[c.compile_id], ops_before=c.metrics.graph_op_count,
            context=context_at(site.file, site.line),
        )  # fmt: skip
    ordered = sorted(sites.values(), key=lambda b: (-b.count, -b.ops_before, b.file, b.line))
    return ordered, len(broken)
