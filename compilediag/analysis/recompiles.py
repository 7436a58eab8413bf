"""Recompilations: which frame compiled again, the failed guard in words, and the fix."""

from __future__ import annotations

import re
from dataclasses import dataclass

from compilediag.analysis.graphs import frame_metrics, frame_name
from compilediag.report import LimitHit, Recompile
from compilediag.target import is_library_file
from compilediag.trace import Compile

CID_PREFIX = re.compile(r"^(?:!\d+/)?\d+/\d+: ")
LOCATION = re.compile(r"#\s*(?P<code>.*?)\s*#\s*(?P<file>[^#]+?):(?P<line>\d+) in (?P<fn>\S+)")
HINT = re.compile(r"\(HINT: (?P<hint>.+?)\)\s*$", re.S)
STACK_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')


@dataclass
class Guard:
    guard: str  # torch's text of the guard that failed
    words: str  # the same in words
    cause: str  # shape, float, int, training, object, type, global, length, other
    suggestion: str
    file: str = ""  # the user line that installed the guard
    line: int = 0
    hint: str = ""  # torch's own hint, when it gives one


def source_name(text: str) -> str:
    """`L['self']._modules['fc'].weight` -> `self.fc.weight`; `L['x']` -> `x`."""
    text = re.sub(r"\b[LG]\['([^']+)'\]", r"\1", text)
    text = re.sub(r"\._modules\['(\d+)'\]", r"[\1]", text)
    text = re.sub(r"\._modules\['([^']+)'\]", r".\1", text)
    text = re.sub(r"\._parameters\['([^']+)'\]", r".\1", text)
    return text


def parse_guard(reason: str) -> Guard:
    text = CID_PREFIX.sub("", reason.strip())
    head, _, stack = text.partition("\nUser stack trace:")
    first = head.splitlines()[0] if head else ""
    guard = first.split("  #", 1)[0].strip()
    hint_m = HINT.search(head)
    loc = LOCATION.search(first)
    file, line = "", 0
    frames = [f for f in STACK_FRAME.finditer(stack) if not is_library_file(f["file"])]
    if frames:
        file, line = frames[-1]["file"], int(frames[-1]["line"])
    words, cause, suggestion = translate(guard)
    if hint_m and cause == "int":
        suggestion = hint_m["hint"].strip()
    g = Guard(guard, words, cause, suggestion, file, line, hint_m["hint"].strip() if hint_m else "")
    if not g.file and loc and not is_library_file(loc["file"]):
        # torch shortens this path ("main/models/net.py"); the caller resolves it
        g.file, g.line = loc["file"], int(loc["line"])
    return g


def translate(guard: str) -> tuple[str, str, str]:
    """A failed guard in words, its cause, and the advice that removes the recompile."""
    m = re.match(
        r"tensor '(?P<n>[^']+)' size mismatch at index (?P<i>\d+)\. expected (?P<a>\d+), actual (?P<b>\d+)",
        guard,
    )
    if m:
        name, dim, a, b = source_name(m["n"]), m["i"], int(m["a"]), int(m["b"])
        advice = (
            f"Mark it dynamic before the first call: torch._dynamo.mark_dynamic({name}, {dim}); "
            "or compile with dynamic=True."
        )
        if {a, b} & {0, 1}:
            advice += (
                " Sizes 0 and 1 are always specialised (broadcasting differs), so a dynamic "
                "dim still recompiles for them: avoid batches of 1, or pad."
            )
        return f"{name} dim {dim} changed {a} → {b}", "shape", advice
    m = re.match(r"(?P<lo>\d+) <= (?P<src>.+)\.size\(\)\[(?P<i>\d+)\]$", guard)
    if m:
        name = source_name(m["src"])
        return (
            f"{name} dim {m['i']} fell below {m['lo']}",
            "shape",
            f"The graph made {name} dim {m['i']} dynamic for sizes >= 2; sizes 0 and 1 are always "
            "specialised (broadcasting differs), so they compile their own graph. Avoid them "
            "(e.g. pad a batch of 1), or accept one extra compile.",
        )
    m = re.match(
        r"tensor '(?P<n>[^']+)' (?P<what>dtype|device|requires_grad|stride|dispatch key set|rank|ndim)s? mismatch(?:[^.]*)\.?\s*(?P<rest>.*)",
        guard,
    )
    if m:
        what = {"dispatch key set": "device or dispatch keys"}.get(m["what"], m["what"])
        detail = f" ({m['rest'].strip()})" if m["rest"].strip() else ""
        return (
            f"{source_name(m['n'])} {what} changed{detail}",
            "tensor_meta",
            f"Call the compiled model with the same {what} every time, or convert the input first.",
        )
    m = re.match(r"GLOBAL_STATE changed: (?P<what>.+)", guard)
    if m:
        what = m["what"].strip().replace("grad_mode", "grad mode")
        return (
            f"global state changed: {what}",
            "global",
            "Call the compiled model under the same torch state every time "
            "(e.g. always inside torch.no_grad(), the same autocast, the same default dtype).",
        )
    m = re.match(r"(?P<src>.+)\.training == (?P<v>True|False)$", guard)
    if m:
        return (
            f"module attribute `{source_name(m['src'])}.training` changed (was {m['v']})",
            "training",
            "Keep the compiled module in one mode (train() or eval()), or compile one instance "
            "per mode.",
        )
    m = re.match(r"___check_obj_id\((?P<src>[^,]+),", guard)
    if m:
        return (
            f"a different object for `{source_name(m['src'])}`",
            "object",
            "An object the code reads was replaced between calls (a new module, function or "
            "config object): create it once and reuse it.",
        )
    m = re.match(r"___check_type_id\((?P<src>[^,]+),", guard)
    if m:
        return (
            f"`{source_name(m['src'])}` has a different type",
            "type",
            "Pass the same Python type every call (e.g. always a tensor, never None or a list).",
        )
    m = re.match(r"len\((?P<src>.+)\) == (?P<n>\d+)$", guard)
    if m:
        return (
            f"length of `{source_name(m['src'])}` changed (was {m['n']})",
            "length",
            "Keep the container the same length, or stack it into one tensor.",
        )
    m = re.match(r"(?P<src>[^=<>!]+?) == (?P<v>-?[\d.]+(?:e-?\d+)?)$", guard)
    if m:
        src, value = source_name(m["src"].strip()), m["v"]
        if "." in value or "e" in value:
            return (
                f"{src} == {value} failed: a Python float is baked into the graph",
                "float",
                f"Pass `{src}` as a tensor (torch.tensor({value})), or compile with dynamic=True.",
            )
        return (
            f"{src} == {value} failed: a Python int is baked into the graph",
            "int",
            f"Make `{src}` a tensor or compile with dynamic=True; an int attribute of an "
            "nn.Module stays static unless torch._dynamo.config.allow_unspec_int_on_nn_module = True.",
        )
    return guard, "other", "See the guard above; TORCH_LOGS=recompiles_verbose shows every guard."


def became_dynamic(c: Compile) -> bool:
    """The recompiled graph has symbolic sizes: torch's automatic dynamic kicked in."""
    return "Sym(" in c.output_graph or int(c.metrics.get("shape_env_guard_count") or 0) > 0


def collect_recompiles(compiles: list[Compile]) -> list[Recompile]:
    out = []
    for c in compiles:
        reasons = list(c.recompile_reasons)
        if not reasons and c.metrics.get("recompile_reason"):
            reasons = [str(c.metrics["recompile_reason"])]
        if not reasons:
            continue
        m = frame_metrics(c, compiles)
        guards = [parse_guard(r) for r in reasons]
        g = guards[0]
        co_file = m.get("co_filename") or ""
        if g.file and not g.file.startswith(("/", "<")):
            g.file = co_file if co_file.endswith(g.file) else ""
            g.line = g.line if g.file else 0
        suggestion = g.suggestion
        if g.cause in ("shape", "float") and became_dynamic(c):
            suggestion = (
                "torch already made it dynamic on this recompile (automatic dynamic), so later "
                "values reuse this graph. To skip this recompile too: " + suggestion
            )
        out.append(
            Recompile(
                frame=frame_name(m.get("co_name", ""), m.get("co_filename") or ""),
                file=m.get("co_filename") or (c.stack[-1].file if c.stack else ""),
                line=int(m.get("co_firstlineno") or (c.stack[-1].line if c.stack else 0)),
                compile_id=c.compile_id,
                reasons=[
                    CID_PREFIX.sub("", r.split("\nUser stack trace:")[0]).strip() for r in reasons
                ],
                failed_guard=g.words,
                failed_guards=[x.words for x in guards],
                cause=g.cause,
                guard_file=g.file,
                guard_line=g.line,
                automatic_dynamic=became_dynamic(c),
                suggestion=suggestion,
            )
        )
    return out


LIMIT = re.compile(r"recompile limit exceeded|cache_size_limit|recompile_limit", re.I)


def collect_limit_hits(compiles: list[Compile], recompiles: list[Recompile]) -> list[LimitHit]:
    hits = []
    for c in compiles:
        reason = str(c.metrics.get("fail_reason") or "")
        if not LIMIT.search(reason):
            continue
        limit = re.search(r"currently set to (\d+)", reason)
        frame_id = c.compile_id.split("/")[-2]
        same = [r for r in recompiles if r.compile_id.split("/")[-2] == frame_id]
        m = frame_metrics(c, compiles)
        hits.append(
            LimitHit(
                frame=frame_name(m.get("co_name", "")),
                file=m.get("co_filename") or "",
                line=int(m.get("co_firstlineno") or 0),
                limit=int(limit.group(1)) if limit else 0,
                compiles=len([r for r in same if r.compile_id != c.compile_id]) + 1,
                distinct_reasons=_distinct(r.failed_guard for r in same),
            )
        )
    return hits


def guard_pattern(text: str) -> str:
    """A guard with its numbers blanked: `x == 0` and `x == 1` are the same reason."""
    return re.sub(r"\d+(\.\d+)?", "#", text)


def _distinct(reasons) -> list[str]:
    """One line per kind of reason: `x == 0`, `x == 1`, ... are one reason seen N times."""
    groups: dict[str, list[str]] = {}
    for r in reasons:
        groups.setdefault(guard_pattern(r), []).append(r)
    return [
        g[0] if len(g) == 1 else f"{g[0]} (and {len(g) - 1} more like it)" for g in groups.values()
    ]
