"""`compilediag fix`: for each graph break whose construct compilediag knows, a minimal
source edit (fixes/patches.py), applied to a scratch copy of the model file, run as
`explain` runs it, and kept only when torch's own counts say the break is gone with no new
one, and the eager and compiled outputs equal the original's on the same inputs (the same
seed; with --train the parameters' gradients too). The compiled call is timed before and
after. The user's file is written only with --apply, and only when it has not changed
since the run; after a dry run of the same file, torch and options, `--apply` applies
that run's verification without running it again (cli/verified.py)."""

from __future__ import annotations

import difflib
import hashlib
import os
import shlex
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from compilediag.cli import verified
from compilediag.cli.commands.common import OutputOptions, check_outputs, make_spec, wrote
from compilediag.cli.config import load_config
from compilediag.cli.options import RunOptions
from compilediag.cli.progress import Live, say
from compilediag.errors import COMPILE_FAILED, DiagError, UsageError
from compilediag.fixes.patches import (
    BreakFix,
    Evidence,
    FixResult,
    NoPatch,
    Patch,
    RecompileFix,
    parse,
    propose,
)
from compilediag.harness.worker_types import WorkerResult, WorkerSpec
from compilediag.report.model import GraphBreak, Report
from compilediag.report.vocabulary import RecompileCause
from compilediag.report.words import plural

SEED = 0
FORMATS = ("table", "json")


@dataclass
class FixOptions:
    run: RunOptions = field(default_factory=RunOptions)
    out: OutputOptions = field(default_factory=OutputOptions)
    apply: bool = False
    repeat: int | None = None
    warmup: int | None = None


@dataclass
class Run:
    report: Report | None  # None: the run failed
    result: WorkerResult | None
    failed: str  # why the run failed ("" when it ran)


def run(opts: FixOptions) -> int:
    if opts.out.format not in FORMATS:
        raise UsageError(
            f"unknown --format {opts.out.format!r} for fix.", hint="Use table or json."
        )
    check_outputs(replace(opts.out, format="table"))
    if (opts.run.target or "").endswith(".json"):
        return _apply_report(opts)
    spec = make_spec(
        opts.run, load_config(), "inductor", timings=True, repeat=opts.repeat, warmup=opts.warmup
    )
    path = Path(spec.target.path)
    check_own_file(path)
    source = path.read_text()
    parse(source, shown(path))  # a file that does not parse: its line, before anything runs
    digest = sha256(source)
    key = verified.key(spec, path, digest)
    # --apply after a dry run of the same file, torch and options: that run's verification
    kept = verified.load(key) if opts.apply else None
    if kept is not None and kept.result.sha256 == digest:
        result = kept.result
        say(
            f"reused the verification of {kept.words()}: the same file, torch and options, "
            f"nothing run again (delete {verified.cache_dir() / 'fix'} to verify afresh)"
        )
    else:
        started = time.monotonic()
        with Live("starting the worker") as live:
            result = find_fixes(spec, path, source, digest, opts.run.timeout, live)
        if not opts.apply:
            verified.save(key, result, time.monotonic() - started)
    if opts.apply and result.diff:
        result.applied = apply(path, source, result.text, digest)
        verified.drop(key)
    emit(result, opts.out)
    return 0


def check_own_file(path: Path) -> None:
    from compilediag.paths import is_library_file

    if is_library_file(str(path)):
        raise UsageError(
            f"{shown(path)} is a library's file: compilediag fix edits only your own code.",
            hint="Copy the model into a file of your own, or fix the library upstream.",
        )


def shown(path: Path) -> str:
    from compilediag.paths import portable_path

    return portable_path(str(path), os.getcwd())


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def run_spec(
    spec: WorkerSpec, timeout: float, candidate: bool = False, live: Live | None = None
) -> Run:
    """One run as explain's (common.run_model), its Report and the worker's result (the
    output check against a saved run is there, not in the Report). A `candidate` (a
    patched copy) that fails is a Run that says why; the user's own model that fails is
    the error explain gives. `live`: the command's progress line, the run's stages on it."""
    from compilediag.cli.commands.common import run_model

    try:
        done = run_model(spec, timeout, progress=live if live is not None else False)
    except DiagError as e:
        if not candidate:
            raise
        return Run(None, None, e.message)
    assert done.result is not None
    return Run(done.report, done.result, "torch.compile failed" if done.failed else "")


def find_fixes(
    spec: WorkerSpec, path: Path, source: str, digest: str, timeout: float, live: Live | None = None
) -> FixResult:
    """Each break's patch, verified by a run of its own. `live`: the progress line (a
    terminal's), each run a phase of it and what each found kept above it."""
    live = live or Live()
    with tempfile.TemporaryDirectory(prefix="compilediag-fix-") as scratch_dir:
        scratch = Path(scratch_dir)
        saved = scratch / "outputs.pt"
        live.phase(f"running {shown(path)} as explain does (seed {SEED})")
        base = replace(spec, seed=SEED, save_outputs=str(saved))
        before = run_spec(base, timeout, live=live)
        if before.report is None or before.failed:  # (only torch.compile fails here)
            error = DiagError(
                "torch.compile failed on the model as it is: no patch can be verified.",
                hint=f"Run `compilediag explain {shown(path)}` to see where it fails.",
            )
            error.exit_code = COMPILE_FAILED
            raise error
        env = before.report.environment
        setup = f"{env.device} · {env.backend}/{env.mode}"
        result = FixResult(shown(path), digest, [], torch=env.torch, setup=setup)
        text, current, k = source, before, 0
        # from the last line up: a patch never moves the lines of the breaks still to come
        ordered = sorted(before.report.graph_breaks, key=lambda b: -b.line)
        tried = sum(not refusal(b, path) for b in ordered)  # at most this many runs
        told: set[str] = set()  # why a patch's call was not timed, said once
        for brk in ordered:
            item = BreakFix(
                brk.file, brk.line, brk.code, brk.cause, brk.gb_id or "", brk.reason,
                advice=brk.suggestion,
            )  # fmt: skip
            result.breaks.insert(0, item)
            item.why = refusal(brk, path)
            if item.why:
                continue
            found = propose(text, brk.line, brk.cause, shown(path))
            if not isinstance(found, Patch):
                item.why = refused_why(found, source, text, brk, shown(path))
                continue
            k += 1
            copy = scratch / str(k) / path.name
            copy.parent.mkdir()
            copy.write_text(found.text)
            live.phase(
                f"verifying the patch at line {brk.line} ({brk.cause}; run {k} of at most {tried})"
            )
            after = run_spec(
                replace(
                    spec, target=replace(spec.target, path=str(copy)), seed=SEED,
                    search_path=[str(path.parent)], compare_outputs=str(saved),
                ),
                timeout, candidate=True, live=live,
            )  # fmt: skip
            why, evidence = judge(brk, current, after)
            if evidence is None:
                item.why = why
                live.say(f"  line {brk.line} ({brk.cause}): not kept: {why}")
                continue
            # measured on the file with the kept patches below it: said with the counts
            evidence.after_lines = [b.line for b in result.breaks[1:] if b.patched]
            item.patched, item.what, item.evidence = True, found.what, evidence
            # shown against the file as it is: this edit alone (the same edit; what was
            # verified is every kept one together, the last run's)
            alone = propose(source, brk.line, brk.cause, shown(path))
            item.diff = unified(source, getattr(alone, "text", found.text), shown(path), 2)
            live.say(f"  line {brk.line} ({brk.cause}): kept: {evidence.text()}")
            if why := untimed(current, after):
                said = _once(why, told)
                # (said with what it is about: a look read it above the report, unplaced)
                say(f"compilediag fix: line {brk.line} ({brk.cause}), kept by its counts and "
                    f"outputs; {said}")  # fmt: skip
            text, current = found.text, after
        result.diff = unified(source, text, shown(path)) if text != source else ""
        result.breaks.sort(key=lambda b: b.line)
        result.recompiles = recompile_fixes(before.report, path)
        result.text = text
        return result


# a guard on Python values the forward itself sets (a list it appends to, a counter)
STATE = (RecompileCause.LENGTH, RecompileCause.INT, RecompileCause.FLOAT, RecompileCause.OBJECT,
         RecompileCause.STRING, RecompileCause.BOOL, RecompileCause.TYPE)  # fmt: skip


def recompile_fixes(report: Report, path: Path) -> list[RecompileFix]:
    """Each recompile (one per line and cause, counted), with why it gets no patch: a guard
    on state the model file's forward changes can't be rewritten without changing that
    state as the rest of the code reads it; one on the inputs is the caller's to change."""
    out: dict[tuple[str, int, str], RecompileFix] = {}  # by where and cause
    for r in report.recompiles:
        file, line = r.guard_file or r.file, r.guard_line or r.line
        ours = bool(file) and Path(file).resolve() == path.resolve()
        if r.cause in STATE and ours and r.guard_line:
            why = (
                f"the guard is on Python state forward changes at line {line}: a rewrite "
                "would change that state as the rest of your code reads it"
            )
        elif not ours:
            why = f"its guard was installed in {file or 'code outside the model file'}"
        elif r.cause in (RecompileCause.SHAPE, RecompileCause.BOUNDED):
            why = "the inputs' sizes changed between calls: the caller or a torch.compile option holds the fix"
        elif r.cause == RecompileCause.TRAINING:
            why = "the mode (train/eval) changed between calls: one graph per mode is expected"
        else:
            why = "no code rewrite is known for this recompile"
        key = (file, line, str(r.cause))
        if key in out:
            out[key].count += 1
            continue
        code = r.guard_code.strip() if r.guard_line else ""
        out[key] = RecompileFix(
            file, line, code, str(r.cause), r.failed_guard, 1, why, r.suggestion
        )
    return list(out.values())


def refusal(brk: GraphBreak, path: Path) -> str:
    """Why a break gets no patch before any is made ("" when one may be tried)."""
    if brk.library:  # a package's own line broke (a library frame of the stdlib or
        # torch under the user's line is fine: the edit is the user's line)
        where = f" ({brk.library})" if brk.library else ""
        return f"it breaks inside a library{where}: compilediag fix never edits a library"
    if not brk.file or Path(brk.file).resolve() != path.resolve():
        return f"it is in {brk.file or 'another file'}: fix patches the model file only"
    return ""


def judge(brk: GraphBreak, before: Run, after: Run) -> tuple[str, Evidence | None]:
    """Why the patch is not kept, or its evidence."""
    if after.failed or after.report is None or after.result is None:
        return f"the patched model failed: {after.failed}", None
    b, a = before.report, after.report
    assert b is not None

    def key(g: GraphBreak) -> tuple[str, str, str]:
        return (g.gb_id or "", g.reason, g.code.strip())

    left = {key(g) for g in b.graph_breaks}
    new = [g for g in a.graph_breaks if key(g) not in left]
    if new:
        g = new[0]
        return f"the patch makes a new break ({g.gb_id or g.reason}: {g.code.strip()})", None
    if key(brk) in {key(g) for g in a.graph_breaks}:
        return "the break is still there by torch's count", None
    if a.summary.graph_breaks >= b.summary.graph_breaks:
        return (
            f"torch counts {a.summary.graph_breaks} graph break(s) after it, "
            f"{b.summary.graph_breaks} before"
        ), None
    if a.summary.recompiles > b.summary.recompiles:
        return f"the patch adds recompiles ({b.summary.recompiles} → {a.summary.recompiles})", None
    if b.summary.graphs and not a.summary.graphs:
        # (with the break gone, torch meets code it can't trace in the same frame and skips
        # it whole: the model no longer compiled at all is no fix)
        return (
            f"torch compiles nothing after it ({plural(b.summary.graphs, 'graph')} → 0): the "
            "code left falls back to eager"
        ), None
    checks = after.result.reference_check
    if (
        len(checks) != 2
        or any(c.compared == 0 and not c.mismatch for c in checks)
        and not all(c.compared == 0 for c in checks)
    ):
        extra = "; ".join(after.result.errors)
        return (
            f"the outputs could not be compared with the original's{': ' + extra if extra else ''}",
            None,
        )
    grads = after.result.gradient_check  # [] without --train
    named = [*zip(("eager outputs", "compiled outputs"), checks, strict=True),
             *zip(("eager gradients", "compiled gradients"), grads, strict=False)]  # fmt: skip
    for what, c in named:
        if c.mismatch:
            err = c.max_abs_err
            said = (
                "" if err is None
                else " (NaN where the original's are numbers)" if err != err
                else f" (max abs err {err:.3g})"
            )  # fmt: skip
            return f"the {what} would change{said}{': ' + c.note if c.note else ''}", None
    return "", Evidence(
        brk.gb_id or brk.reason,
        (b.summary.graphs, a.summary.graphs),
        (b.summary.graph_breaks, a.summary.graph_breaks),
        (b.summary.recompiles, a.summary.recompiles),
        checks[0].max_abs_err or 0.0,
        checks[1].max_abs_err or 0.0,
        compiled_times(b, a)[:2],
        max((c.max_abs_err or 0.0 for c in grads), default=None),
    )


def compiled_ms(report: Report) -> float | None:
    """The compiled call's median, where the run's timings can be trusted (else None)."""
    t = report.timings
    if t and t.compiled_ms and t.noise:
        return None
    return t.compiled_ms.median if t and t.compiled_ms else None


def compiled_times(before: Report, after: Report) -> tuple[float | None, float | None, str]:
    """The compiled call before and after a patch, from trusted figures only, and what
    stands in for a median that can't be trusted ("" for none): both medians where both
    runs' timings can be trusted; else both runs' one-thread costs (the cross-check, a
    like-for-like pair); else none, and why."""
    b, a = compiled_ms(before), compiled_ms(after)
    if b is not None and a is not None:
        return b, a, ""
    noise = next((r.timings.noise for r in (before, after) if r.timings and r.timings.noise), "")
    if not noise:
        return b, a, ""
    one = [r.timings.compiled_ms.one_thread_ms if r.timings and r.timings.compiled_ms else None
           for r in (before, after)]  # fmt: skip
    why = f"the timings are not reliable: {noise}"
    if one[0] is not None and one[1] is not None:
        return one[0], one[1], f"the compiled call's times are its one-thread costs, {why}"
    return None, None, f"the compiled call's time is left out, {why}"


def refused_why(found: NoPatch, source: str, text: str, brk: GraphBreak, path: str) -> str:
    """Why no patch, said with the file's own lines where the file as it is gives the same
    refusal (the kept patches below moved the lines it names)."""
    if text == source:
        return found.why
    mine = propose(source, brk.line, brk.cause, path)
    return found.why if isinstance(mine, Patch) else mine.why


def _once(why: str, told: set[str]) -> str:
    """Why a kept patch's compiled call is not timed, in short: the reason's first words
    (`the cores were busy`), then `as above` for the next patch - the reason is the
    machine's, the same for each, and the report's timings hold it whole."""
    head, sep, reason = why.partition(": ")
    if not sep:
        return why
    short = reason.split("; ")[0].split(" (")[0]
    if short in told:
        return f"{head}: as above"
    told.add(short)
    return f"{head}: {short}"


def untimed(before: Run, after: Run) -> str:
    """What a kept patch's evidence says of the compiled call's time in place of the
    medians: one-thread costs, or nothing (compiled_times); "" when the medians stand."""
    if before.report is None or after.report is None:
        return ""
    return compiled_times(before.report, after.report)[2]


def unified(old: str, new: str, name: str, context: int = 3) -> str:
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    return "".join(difflib.unified_diff(a, b, f"a/{name}", f"b/{name}", n=context))


def apply(path: Path, source: str, text: str, digest: str) -> str:
    """Write the patched file, the original kept beside it; refused when the file changed
    since the run. Returns where the original is."""
    if sha256(path.read_text()) != digest:
        raise UsageError(
            f"{shown(path)} changed since compilediag fix read it; nothing was written.",
            hint=f"Run `compilediag fix {shown(path)} --apply` again on the file as it is now.",
        )
    check_own_file(path)
    keep = path.with_name(path.name + ".orig")
    n = 1
    while keep.exists():
        keep = path.with_name(f"{path.name}.orig.{n}")
        n += 1
    keep.write_text(source)
    from compilediag.fsutil import write_atomic

    write_atomic(path, text)
    wrote(str(path), f"patched; the original is {keep.name}")
    sys.stderr.write(f"to revert: mv {shlex.quote(str(keep))} {shlex.quote(str(path))}\n")
    return str(keep)


def emit(result: FixResult, out: OutputOptions) -> None:
    from compilediag.render.patch import render_fix

    if out.output:
        from compilediag.fsutil import write_output_file

        write_output_file(out.output, render_fix(result, out.format), "--output")
        wrote(out.output, f"the fixes, {out.format}")
        return
    sys.stdout.write(render_fix(result, out.format))


def _apply_report(opts: FixOptions) -> int:
    """`fix --apply REPORT.json`: the remedies a saved `run --try-fixes` report kept,
    written into the job's code and verified by running the edited job (without --apply:
    what would be written, nothing run)."""
    from compilediag.cli.commands.again.apply_kept import applied_text, apply_kept, dry_run
    from compilediag.cli.commands.common import load_report
    from compilediag.cli.commands.run import job_env

    report = load_report(opts.run.target or "", "the report")
    if report.runtime is None or not report.runtime.tried:
        raise UsageError(
            f"{opts.run.target} holds no remedies measured by --try-fixes.",
            hint="Make one with: compilediag run --try-fixes --profile-steps 5-10 "
            "--format json -o report.json -- python train.py",
        )
    if not opts.apply:
        sys.stdout.write(dry_run(report) + "\n")
        return 0
    sys.stdout.write(applied_text(apply_kept(report, job_env, say)) + "\n")
    return 0
