"""`run --try-fixes --apply` and `fix --apply REPORT.json`: the remedies --try-fixes kept,
written into the job's code (fixes/patches/kept.py makes each edit), each file's original
kept as FILE.orig, then the edited job run once to the window's end to verify it: its
step against the unchanged runs' (a job that fails edited gets its files back). Where the
kept remedies were measured together and kept, they are written together; where together
they were not kept, only the single remedy that gained most."""

from __future__ import annotations

import difflib
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from compilediag.fixes.patches.base import Refused
from compilediag.fixes.patches.kept import (
    COMPILE_MODE,
    SETTINGS,
    after_imports,
    at_call,
    callee_of,
    keywords_of,
)
from compilediag.report.words import ms, times

if TYPE_CHECKING:
    from compilediag.cli.commands.again.try_fixes import EnvFor, Say
    from compilediag.report.model import Report, Runtime, Tried

# written by hand: what CUDA graphs need where the job keeps an output past the next call
MARK_STEP = (
    "give each parameter a .grad of its own before the first micro-step (p.grad = "
    "torch.zeros_like(p), then opt.zero_grad(set_to_none=False)), call "
    "torch.compiler.cudagraph_mark_step_begin() where each micro-step (each iteration, where "
    "one calls several models: a GAN's) begins, never between a model's call and its "
    "backward, and clone the outputs you keep past it (not written: where your loop does "
    "these is yours to choose)"
)


@dataclass
class Applied:
    """What --apply wrote: each file's diff, the edits in words, what it left to the user
    and why, and the verifying run in words."""

    diffs: list[str] = field(default_factory=list)
    edits: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)
    verified: str = ""


def to_apply(runtime: Runtime) -> tuple[list[Tried], str]:
    """The single remedies to write, and why those (in words)."""
    singles = [t for t in runtime.tried if len(t.remedies) <= 1]
    kept = [t for t in singles if t.kept]
    together = next((t for t in runtime.tried if len(t.remedies) > 1), None)
    if together is None or together.kept or not kept:
        return kept, ""
    best = min(kept, key=lambda t: t.ratio or 1.0)
    return [best], (f"the kept remedies together were not kept ({together.why}): only "
                    f"{best.remedy}, the one that gained most, is written")  # fmt: skip


def script_of(command: list[str]) -> str:
    """The job's script: the first .py file of its command ("" where it has none)."""
    return next((x for x in command if x.endswith(".py") and Path(x).is_file()), "")


def apply_kept(report: Report, env_for: EnvFor | None, say: Say, write: bool = True) -> Applied:
    """Write the kept remedies (each file's original as FILE.orig), then run the edited job
    once to verify it (`env_for`: run.py's job environment; None: not run). `write` False:
    the diffs only."""
    out = Applied()
    runtime = report.runtime
    if runtime is None or not runtime.tried:
        out.left.append("the report holds no --try-fixes runs: nothing to write")
        return out
    chosen, why = to_apply(runtime)
    if why:
        out.left.append(why)
    if not chosen:
        out.left.append("no remedy was kept: your code is unchanged")
        return out
    texts: dict[str, str] = {}
    for t in chosen:
        try:
            path, what = _edit(t, runtime.command, texts)
        except (Refused, OSError) as e:
            out.left.append(f"{t.remedy}: not written: {e}")
            continue
        out.edits.append(f"{what.replace('@', _shown(path))} ({t.why})")
        if t.remedy == "cudagraphs_marked":
            out.left.append(MARK_STEP)
    originals = {p: Path(p).read_text() for p in texts}
    for path, text in texts.items():
        if text == originals[path]:
            continue
        name = _shown(path)
        diff = difflib.unified_diff(
            originals[path].splitlines(True), text.splitlines(True), f"a/{name}", f"b/{name}"
        )
        out.diffs.append("".join(diff))
        if write:
            shutil.copyfile(path, path + ".orig")
            Path(path).write_text(text)
    if out.diffs and write and env_for is not None:
        out.verified = _verify(report, runtime, originals, env_for, say)
    return out


def _edit(t: Tried, command: list[str], texts: dict[str, str]) -> tuple[str, str]:
    """One remedy's edit into `texts` (file -> its text so far): the file and the edit in
    words."""
    if t.remedy in SETTINGS:
        path = script_of(command)
        if not path:
            raise Refused("the job's command names no .py file to write the setting into")
        statement = SETTINGS[t.remedy]
        texts[path] = after_imports(_text(path, texts), path, statement)
        return path, f"{statement} after the imports of @"
    file, _, line = t.where.rpartition(":")
    if not file or not line.isdigit():
        raise Refused("the run did not say where your code makes the object")
    if t.remedy.startswith("cudagraphs"):
        callee, keywords = "compile", dict(COMPILE_MODE)
    else:
        callee, keywords = callee_of(t.code), keywords_of(t.code)
    texts[file] = at_call(_text(file, texts), file, int(line), callee, keywords)
    given = ", ".join(f"{k}={v}" for k, v in keywords.items())
    return file, f"{callee}(..., {given}) at @:{line}"


def _shown(path: str) -> str:
    """The path as the user gave it, relative to the folder they are in where it is there."""
    p = Path(path)
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return path


def _text(path: str, texts: dict[str, str]) -> str:
    if path not in texts:
        texts[path] = Path(path).read_text()
    return texts[path]


def _verify(
    report: Report, runtime: Runtime, originals: dict[str, str], env_for: EnvFor, say: Say
) -> str:
    """The edited job once to the window's end: its step against the unchanged runs';
    a job that fails edited gets its files back."""
    from compilediag.analysis.step.remedies import window_mean
    from compilediag.cli.commands.again.try_fixes import Job, launch_job

    a, z = runtime.window[:2] if len(runtime.window) >= 2 else (0, 0)
    if not z:
        return "not verified: the report holds no window of steps to run the edited job to"
    say(f"compilediag: --apply: running the edited job to step {z} to verify it")
    job = Job(list(runtime.command), f"{a}-{z}", runtime.stop_after)
    launched, interrupted = launch_job(job, None, env_for)
    if interrupted:
        return "not verified: interrupted"
    if launched.failure:
        for path, text in originals.items():
            Path(path).write_text(text)
        return (f"the edited job failed ({launched.failure}): your files are as they were "
                "(the edited ones not kept)")  # fmt: skip
    step = window_mean(launched.run)
    base = runtime.try_baseline.step_ms if runtime.try_baseline else None
    if step is None or not base:
        return "not verified: the edited job's window was not measured"
    gain = f"{times(base / step)} faster" if step < base else f"{times(step / base)} slower"
    return (f"verified: the edited job ran steps {a}-{z} at {ms(step)} a step, one run, against "
            f"{ms(base)} as it was ({gain})")  # fmt: skip


def dry_run(report: Report) -> str:
    """What `fix --apply REPORT.json` would write, nothing written or run."""
    a = apply_kept(report, None, lambda _: None, write=False)
    more = ["compilediag: add --apply to write these and run the edited job"] if a.diffs else []
    return "\n".join([applied_text(a, "--apply would write"), *more])


def applied_text(a: Applied, verb: str = "--apply: wrote") -> str:
    """What --apply wrote, as printed: the edits (each with its measured gain), the diffs,
    what was left to the user, the verifying run."""
    out = [f"compilediag: {verb} {x}" for x in a.edits]
    out += [d.rstrip("\n") for d in a.diffs]
    out += [f"compilediag: --apply: {x}" for x in a.left]
    if a.verified:
        out.append(f"compilediag: --apply: {a.verified}")
    return "\n".join(out)
