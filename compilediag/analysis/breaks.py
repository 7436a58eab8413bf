"""Graph breaks: parse torch's break text, find the user's line, classify, advise, de-duplicate."""

from __future__ import annotations

import linecache
import re
from dataclasses import dataclass, field

from compilediag.report import GraphBreak, Site
from compilediag.target import is_library_file
from compilediag.trace import Compile

FRAME_LINE = re.compile(r'^\s*File "(?P<file>.+)", line (?P<line>\d+), in (?P<name>.+)$')
LOCATION = re.compile(r"Graph break in user code at (?P<file>.+):(?P<line>\d+)\s*$", re.M)
GB_URL = re.compile(r"(https?://\S+/(gb\d+)\.html)", re.I)
CARETS = re.compile(r"^\s*[\^~]+\s*$")


@dataclass
class ParsedBreak:
    """What one `dynamo_graph_break_reason` artifact says."""

    reason: str
    explanation: str = ""
    hints: list[str] = field(default_factory=list)
    gb_id: str | None = None
    doc_url: str | None = None
    frames: list[Site] = field(default_factory=list)  # outermost first
    location: Site | None = None  # "Graph break in user code at FILE:LINE"
    raw_reason: str = ""


def parse_break_text(text: str) -> ParsedBreak:
    """Read the break text of torch 2.6 to 2.13 (the layout of the reason differs)."""
    loc = LOCATION.search(text)
    location = Site(loc["file"], int(loc["line"])) if loc else None

    head, _, tail = text.partition("User code traceback:")
    m = re.search(r"^(?:Graph Break Reason|Reason): ?(.*)", head, re.M | re.S)
    block = m.group(1) if m else head
    lines = block.splitlines()

    expl_at = next((i for i, ln in enumerate(lines) if ln.strip().startswith("Explanation:")), None)
    if expl_at is not None:
        # 2.8+: "<context line>\n\n<gb_type>\n  Explanation: ...\n  Hint: ..."
        before = [ln.strip() for ln in lines[:expl_at] if ln.strip()]
        reason = before[-1] if before else ""
        explanation, hints = _explanation_and_hints(lines[expl_at:])
    else:
        # older: "Unsupported: call_function BuiltinVariable(print) [...] {}"
        reason = next((ln.strip() for ln in lines if ln.strip()), "")
        reason = re.sub(r"^(Unsupported|torch\._dynamo\.exc\.\w+): ", "", reason)
        explanation, hints = "", []
    url = GB_URL.search(text)
    return ParsedBreak(
        reason=reason.rstrip(":"),
        explanation=explanation,
        hints=hints,
        gb_id=url.group(2).upper() if url else None,
        doc_url=url.group(1) if url else None,
        frames=_frames(tail),
        location=location,
        raw_reason=block.strip(),
    )


def _explanation_and_hints(lines: list[str]) -> tuple[str, list[str]]:
    explanation: list[str] = []
    hints: list[str] = []
    section = "explanation"
    for ln in lines:
        s = ln.strip()
        if s.startswith("Explanation:"):
            explanation.append(s.removeprefix("Explanation:").strip())
        elif s.startswith("Hint:"):
            section = "hint"
            hints.append(s.removeprefix("Hint:").strip())
        elif s.startswith(("Developer debug context:", "For more details")):
            section = "done"
        elif section == "explanation" and s and not s.startswith("#") and "=" not in s:
            explanation.append(s)
        elif section == "explanation" and not s:
            section = "gap"  # the code context torch adds after a blank line is not prose
    return " ".join(explanation).strip(), hints


def _frames(tail: str) -> list[Site]:
    frames: list[Site] = []
    for ln in tail.splitlines():
        if ln.startswith(("Traceback (most recent call last)", "NoneType: None")):
            break
        m = FRAME_LINE.match(ln)
        if m:
            frames.append(Site(m["file"], int(m["line"]), "", m["name"].strip()))
        elif frames and ln.strip() and not CARETS.match(ln) and not frames[-1].code:
            frames[-1].code = ln.strip()
    return frames


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
CAUSES: list[tuple[str, re.Pattern, str]] = [
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
        for text in c.graph_breaks:
            total += 1
            parsed = parse_break_text(text)
            site, lib = user_site(parsed)
            code = site.code or linecache.getline(site.file, site.line).strip()
            key = (site.file, site.line, parsed.reason)
            if key in sites:
                gb = sites[key]
                gb.count += 1
                if c.compile_id not in gb.compile_ids:
                    gb.compile_ids.append(c.compile_id)
                continue
            lib_code = ""
            if lib is not None:
                lib_code = lib.code or linecache.getline(lib.file, lib.line).strip()
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
                ops_before=int(c.metrics.get("graph_op_count") or 0),
            )
    ordered = sorted(sites.values(), key=lambda b: (-b.count, -b.ops_before, b.file, b.line))
    return ordered, total
