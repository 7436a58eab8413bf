"""Graph breaks: parse torch's break text, find the user's line, classify, advise, de-duplicate."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import replace

from compilediag.analysis.compile.frameworks import (
    ALWAYS_FRAMEWORK_ADVICE,
    DDP,
    framework_of,
)
from compilediag.analysis.history import Entry, History
from compilediag.analysis.source import (
    assignments_in_function,
    branch_only_reports,
    branched_on,
    code_at,
    context_at,
    in_autograd_function,
    read_later,
    reads_values,
)
from compilediag.fixes import Fix, fix_for
from compilediag.fixes.model import GUARD
from compilediag.fixes.values import scalar_read_later
from compilediag.paths import (
    Owner,
    installed_package,
    is_library_file,
    possessive,
)
from compilediag.report.model import GraphBreak, Report, Site
from compilediag.report.vocabulary import BreakCause
from compilediag.report.words import BREAK_SAVES, ms, percent
from compilediag.trace.compiles import Frame
from compilediag.trace.formats import NO_RESUME, RESUME, ParsedBreak, frame_name, parse_break_text


def user_site(parsed: ParsedBreak, outer: Sequence[Frame] = ()) -> tuple[Site, Site | None]:
    """The user's own line, and the library frame beneath it when the break is in a library.

    `outer`: the stack that called the compiled frame (dynamo_start's). A break whose frames
    are all library code (a compiled DDP wrapper: torch 2.6 shows only DDP's frames) belongs
    to the user's line that called into it."""
    frames = parsed.frames or ([parsed.location] if parsed.location else [])
    if not frames:
        return Site("<unknown>", 0), None
    inner = frames[-1]
    if not is_library_file(inner.file):
        return inner, None
    mine = [f for f in frames if not is_library_file(f.file)]
    if not mine:
        mine = [Site(f.file, f.line, f.code, f.name) for f in outer if not is_library_file(f.file)]
    return (mine[-1], inner) if mine else (inner, None)


# --- causes and advice ----------------------------------------------------------------

# Causes and fixes live in compilediag.fixes: a fix for every gb_type of torch's registry
# (torch's hints as the floor, compilediag's own fix on top). Its LEGACY patterns (pattern
# over reason + explanation + code, GB id of the fix) read the break texts of torch before
# 2.8, which have no GB id; first match wins.


def classify(
    reason: str,
    explanation: str,
    code: str,
    *,
    gb_id: str | None = None,
    hints: Sequence[str] = (),
    library_file: str | None = None,
) -> tuple[BreakCause, str]:
    """(cause, suggestion) of a break: `compilediag.fixes.fix_for`, by GB id where given,
    else by torch's gb_type (`reason`), its explanation, then the pre-2.8 patterns."""
    fix = fix_for(gb_id, reason, explanation, hints, code, library_file)
    return fix.cause, fix.suggestion


def from_your_side(library: str, fix: Fix) -> str:
    """Advice for a break on a line of an installed library's code, which the user does not
    edit: a setting applies from their side; a code change does not, so they work around
    the library's code, and learn what would remove the break inside it."""

    def lower(text: str) -> str:
        return text[:1].lower() + text[1:]

    own = possessive(library)
    if fix.config:  # the setting, not the guard: that one edits the library's line
        text = fix.suggestion.replace(f", or {GUARD}", "").replace(f" Or {GUARD}.", "")
        return f"The line is {own} code, but a setting removes the break: " + lower(text)
    inside = f" Inside {library}, this would remove it: {lower(fix.text)}" if fix.specific else ""
    return (
        f"The line is {own} own code, which you don't edit. From your side: compile the parts "
        "of the model that run without breaks (`model.part = torch.compile(model.part)`) "
        f"instead of the whole model, or leave the call into {library} uncompiled "
        f"(`torch.compiler.disable`); the rest still compiles.{inside}"
    )


def restarts(h: History) -> list[tuple[Entry, Site, str]]:
    """Breaks of a trace that logs no break artifact (older layouts): every resume frame
    Dynamo made (`torch_dynamo_resume_in_f_at_9`) stands for a break at that line, and the
    compile that broke there may say why in its `restart_reasons`."""
    if any(e.compile.graph_breaks for e in h):
        return []
    out = []
    for k in h:
        r = RESUME.match(k.metrics.co_name)
        if not r or k.id.frame_compile:  # one break per resume frame, not per recompile
            continue
        line, file = int(r["line"]), k.metrics.co_filename
        # the compile that broke: a frame of the same function that starts before the line
        broke = [
            e for e in h
            if e.metrics.co_filename == file and e.id.frame_compile == 0
            and (e.metrics.co_name == r["fn"] or _resumes(e.metrics.co_name, r["fn"], line))
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


def collect_breaks(h: History) -> tuple[list[GraphBreak], int]:
    """Every finding once, and how many times a graph was broken.

    A finding is a user site and the library site under it (each library site its own
    finding), with its reason. Its `count` is the number of compiles it happened in: torch
    logs a break again on the restart of the same compile (another attempt), and each
    outer frame may report it; those are one. The total counts (compile, user site) pairs.
    """
    sites: dict[tuple[str, int, str, str, int], GraphBreak] = {}
    broken: set[tuple[str, str, int]] = set()
    # a frame's line a library's break came from, where its traceback left the frame out:
    # found once (by the resume function), the same for a later compile of the frame
    resumed: dict[tuple[str, str, str, int], Site] = {}
    for c in h:
        for logged in c.compile.graph_breaks:
            parsed = parse_break_text(logged.text)
            site, lib = user_site(parsed, c.compile.stack)
            if lib is not None and _left_out(parsed, c):
                where = (c.code.file, c.code.name, lib.file, lib.line)
                if where not in resumed and (found := _resumed_site(h, c, site)) is not site:
                    resumed[where] = found
                site = resumed.get(where, site)
            broken.add((c.compile_id, site.file, site.line))
            key = (
                site.file,
                site.line,
                parsed.reason,
                lib.file if lib else "",
                lib.line if lib else 0,
            )
            if not _seen_again(sites, key, c.compile_id):
                sites[key] = _logged_break(c, parsed, site, lib)
    for c, site, reason in restarts(h):
        broken.add((c.compile_id, site.file, site.line))
        key = (site.file, site.line, reason, "", 0)
        if not _seen_again(sites, key, c.compile_id):
            sites[key] = _restart_break(c, site, reason)
    # the most frequent first, then in the source's order (explain's timings, where taken,
    # order them by cost: timings.py); the table's header says which
    ordered = sorted(sites.values(), key=lambda b: (-b.count, b.file, b.line))
    captured_then_deferred(ordered)
    return ordered, len(broken)


def _left_out(parsed: ParsedBreak, c: Entry) -> bool:
    """Whether the break's traceback leaves out the user's frame torch compiled (torch
    2.13's, under nn.TransformerEncoder's `.item()`: the caller's lines and torch's only)."""
    return c.code.owner == Owner.USER and not any(
        f.file == c.code.file and f.name == c.code.name for f in parsed.frames
    )


def _resumed_site(h: History, c: Entry, site: Site) -> Site:
    """The line of the compiled frame a break under it came from, where its traceback left
    the frame out (its user line was the frame's start, `def forward`, or the line that
    called the model): the line torch resumed after, by its resume function's name
    (`torch_dynamo_resume_in_forward_at_142`, the first compiled after it in that file),
    where one was made; torch's own warning names that line."""
    later = h.entries[h.entries.index(c) + 1 :] if c in h.entries else []
    for e in later:
        m = RESUME.match(e.code.name)
        if m and m["fn"] == c.code.name and e.code.file == c.code.file:
            line = int(m["line"])
            return Site(c.code.file, line, code_at(c.code.file, line), c.code.name)
    return site


ASSIGNED = re.compile(r"^\s*(\w+)\s*=(?!=)")
REORDER = "reorderable_logging_functions.add("


def captured_then_deferred(breaks: list[GraphBreak]) -> None:
    """A logging call's fix that defers it (reorderable_logging_functions) holds while its
    arguments are tensors, constants or string formatters (torch's can_reorder_logs; an
    f-string is one, whatever its fields hold: torch defers `f"positive {n}"`): a
    number an `.item()` before it read is a constant while that read breaks the graph, and
    an unbacked symbol once its own fix (capture_scalar_outputs) traces it; with both fixes
    the call breaks again. Where the call is given such a value, its advice says so."""
    reads = [
        (b, m.group(1))
        for b in breaks
        if b.cause is BreakCause.ITEM
        and "capture_scalar_outputs" in b.suggestion
        and (m := ASSIGNED.match(b.code))
    ]
    for b in breaks:
        if REORDER not in b.suggestion:
            continue
        for read, name in reads:
            if read.file != b.file or read.line >= b.line:
                continue
            if not reads_values(b.code, name):  # (len(), an f-string: deferred as they are)
                continue
            assigned = [n for n, _ in assignments_in_function(b.file, b.line, name) if n < b.line]
            if not assigned or assigned[-1] != read.line:
                continue
            said = (
                f"Deferring it holds while `{name}` (line {read.line}) is a Python number: "
                f"line {read.line}'s fix (capture_scalar_outputs) traces it as a symbol, which "
                "Dynamo cannot defer, so with both fixes guard the call instead."
            )
            head, sep, expected = b.suggestion.partition(" Expected: ")
            b.suggestion = f"{head} {said}{sep}{expected}"
            break


# --- de-duplication -------------------------------------------------------------------


def _seen_again(
    sites: dict[tuple[str, int, str, str, int], GraphBreak],
    key: tuple[str, int, str, str, int],
    compile_id: str,
) -> bool:
    """A finding already made: counted once more where this compile is a new one."""
    gb = sites.get(key)
    if gb is None:
        return False
    if compile_id not in gb.compile_ids:
        gb.compile_ids.append(compile_id)
        gb.count += 1
    return True


REPORTING_BRANCH = (
    "The branch only reports (a print, a log, a warning or a raise): nothing torch.where "
    f"could pick between. Move the check out of the compiled code, or {GUARD}."
)


def _logged_break(c: Entry, parsed: ParsedBreak, site: Site, lib: Site | None) -> GraphBreak:
    """A break torch logged, with its fix: a framework's own setting where the break is in
    its code and the fix would edit it, the library's side where it is a library's."""
    code = site.code or code_at(site.file, site.line)
    lib_code = ""
    if lib is not None:
        lib_code = lib.code or code_at(lib.file, lib.line)
    fix = fix_for(
        parsed.gb_id, parsed.reason, parsed.explanation, parsed.hints,
        code + " " + lib_code, lib.file if lib else None, c.metrics.pytorch_version,
    )  # fmt: skip
    branch_line = site.line
    if fix.cause == BreakCause.ITEM and (used := branched_on(site.file, site.line)):
        # the value is a condition a line later: capture_scalar_outputs moves the break there
        # (a look: "the break is gone" where torch's explain still found it, at the `if`)
        fix = fix_for(
            parsed.gb_id, parsed.reason, parsed.explanation, parsed.hints,
            f"{used[1]} {code}", lib.file if lib else None, c.metrics.pytorch_version,
        )  # fmt: skip
        branch_line = used[0]
    elif fix.cause == BreakCause.ITEM and fix.config and (read := read_later(site.file, site.line)):
        fix = scalar_read_later(fix, code, *read)  # (read, not branched on: it may break there)
    cause, suggestion = fix.cause, fix.suggestion
    if "reorderable_logging_functions" in fix.config and drops_reordered(site):
        suggestion = IN_AUTOGRAD_FUNCTION  # (a look: the break went, the print never ran)
    branch = (BreakCause.ITEM_BRANCH, BreakCause.DATA_DEPENDENT_BRANCH)
    if cause in branch and branch_only_reports(site.file, branch_line):
        suggestion = REPORTING_BRANCH  # (torch.where can't hold a print: a look read it)
    framework = None
    if lib is not None:
        chain = [f.file for f in parsed.frames if is_library_file(f.file)] + [lib.file]
        framework = framework_of(*chain)
    library = installed_package((lib or site).file)
    if fix.at_call:  # an argument of the user's call into the library: said as it is
        pass
    elif framework is not None and (
        framework[0] in ALWAYS_FRAMEWORK_ADVICE
        or (fix.code_edit and not fix.config)
        or not fix.specific
    ):
        suggestion = framework[1]
    elif library:
        suggestion = from_your_side(library, fix)
    skipped = frame_name(c.code.name) if NO_RESUME.search(parsed.raw_reason) else ""
    if skipped:
        suggestion = f"{suggestion} {not_resumed_words(skipped)}".strip()
    return GraphBreak(
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
        library=library,
        fix_source=fix.source,
        compile_ids=[c.compile_id],
        ops_before=c.metrics.graph_op_count,
        context=context_at(site.file, site.line),
        skipped_rest=skipped,
    )


def drops_reordered(site: Site | GraphBreak) -> bool:
    """Whether torch drops a print at `site` that reorderable_logging_functions reorders:
    inside a torch.autograd.Function the break goes, and the print never runs (2.13-2.15).
    `--try-fixes` does not try the setting there."""
    return in_autograd_function(site.file, site.line)


IN_AUTOGRAD_FUNCTION = (
    f"{GUARD[:1].upper()}{GUARD[1:]}. Not reorderable_logging_functions here: inside a "
    "torch.autograd.Function, torch drops a print it would reorder (the break goes, and the "
    "print never runs)."
)


def not_resumed_words(function: str) -> str:
    """What a break torch could not resume after leaves: the rest of the function uncompiled,
    which the break's fix lets torch compile, with whatever breaks further in it."""
    function = function.replace(", after line", " after line")  # (a look read it garbled)
    return (
        f"torch could not resume after this break: the rest of {function} runs in eager mode, "
        "in no graph. With the break gone that code compiles too, and a break further in it "
        "shows then."
    )


def _restart_break(c: Entry, site: Site, reason: str) -> GraphBreak:
    """A break found only by the compile's restart (no break record of its own)."""
    code = code_at(site.file, site.line)
    cause, suggestion = classify(reason, "", code)
    return GraphBreak(
        file=site.file, line=site.line, code=code, reason=reason, suggestion=suggestion,
        cause=cause, compile_ids=[c.compile_id], ops_before=c.metrics.graph_op_count,
        context=context_at(site.file, site.line),
    )  # fmt: skip


# the sentence of the "compiled nothing" note that tells the user to reorder DDP and compile
DDP_REORDER = (
    "Compile the module, then wrap it (DDP(torch.compile(model))), or compile each block; "
    "see torch's notes on DDP with torch.compile."
)
# a wrapper torch.compile was given that a framework, not the user, put around the model
WRAPPERS = ("DistributedDataParallel", "FullyShardedDataParallel")
# each framework's own setting that compiles the model's blocks instead of its wrapper
# (the Trainer hands torch_compile to accelerate, which reads the same variable)
FRAMEWORK_SETTINGS = {
    "accelerate": (
        "accelerate's own setting compiles the model's repeated blocks instead of the "
        "wrapper: ACCELERATE_DYNAMO_USE_REGIONAL_COMPILATION=1 in the environment (or "
        "TorchDynamoPlugin(use_regional_compilation=True))."
    ),
}


def framework_wrapped(report: Report, calls: list[tuple[str, str, int]]) -> None:
    """Breaks inside DDP's code where a framework compiled the DDP-wrapped model
    (`calls`: each torch.compile call of the job, as (what, file, line)): the order is the
    framework's choice, not a line of the user's, so the advice says whose choice it is,
    what the breaks cost a step where the window measured it, and the framework's setting
    where it has one - not `DDP(torch.compile(model))`."""
    owned = [(w, f, n) for w, f, n in calls if w in WRAPPERS and installed_package(f)]
    if not owned:
        return
    what, file, line = owned[0]
    package = installed_package(file)
    chose = (
        f"{package} wrapped the model in {what} and compiled the wrapper "
        f"({package}/{os.path.basename(file)}:{line}): the order is {possessive(package)} "
        "choice, not a line of yours."
    )
    setting = FRAMEWORK_SETTINGS.get(package, "")
    for i, n in enumerate(report.notes):  # "compiled nothing" under DDP
        if DDP_REORDER in n.message:
            report.notes[i] = replace(
                n, message=n.message.replace(DDP_REORDER, f"{chose} {setting}".strip())
            )
    breaks = [b for b in report.graph_breaks if b.framework == DDP]
    breakdown = report.timings.breakdown if report.timings else None
    step = breakdown.call_ms if breakdown else None
    for b in breaks:
        if b.time_lost_ms is not None:
            share = f" ({percent(b.time_lost_ms / step)} of the step)" if step else ""
            cost = f"Measured, {ms(b.time_lost_ms)} a step runs in eager code here{share}: {BREAK_SAVES}."
        elif breakdown is not None:
            cost = (
                "In the profiled steps no time between graphs is its: that code runs before "
                "and after the compiled graph, within the compiled call's own work and the "
                f"rest of the step ({ms(breakdown.in_call_ms + breakdown.outside_ms)} of "
                f"{ms(breakdown.call_ms)})."
            )
        else:
            cost = "--profile-steps A-B measures the eager time around it a step."
        b.suggestion = (
            f"{chose} The break is in {what}'s own code, which runs eagerly either way. "
            f"{cost} {setting}"
        ).strip()
