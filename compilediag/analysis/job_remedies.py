"""`compilediag run --try-fixes`: which remedies a job's report calls for (each made with no
edit of the user's code, in a run of its own: harness/bootstrap/_compilediag_runtime/
remedies.py makes it), and each one's run measured against the unchanged run's: the
step and the part the remedy targets over the same window (medians), breaks and
recompiles, and the losses of the window's steps. A remedy is kept only where the step
improved beyond the two runs' spread and nothing got worse."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from compilediag.analysis.kernel_times import GEMMS
from compilediag.analysis.other_work import training_profile, work_steps
from compilediag.analysis.runtime import JobRun, step_medians
from compilediag.harness.worker_types import ProcessRuntime
from compilediag.report.model import Report, Tried
from compilediag.report.words import ms

# a part this share of the step is worth a run of its own
MIN_SHARE = 0.1
# a step this much shorter (and beyond the runs' spread) is an improvement
MIN_GAIN = 0.05
# the losses of two runs of a seeded job match within this (relative); TF32's own rounding
# moves a float32 loss by up to about 1e-3 a step
LOSS_RTOL = 1e-3
LOSS_RTOL_TF32 = 2e-2
# optimizers whose fused implementation torch has (CPU and CUDA)
FUSED = ("Adam", "AdamW", "SGD", "Adagrad")


@dataclass
class Candidate:
    """A remedy the report calls for: its name (remedies.py's), the part it targets
    (step_medians' name; "" for the whole step), and why, in words."""

    remedy: str
    part: str
    why: str


def candidates(report: Report) -> list[Candidate]:
    """The remedies this job's report calls for, most promising first (by the share of the
    step their part holds)."""
    job = report.runtime
    if job is None or not job.step_medians:
        return []
    medians = job.step_medians
    step = medians.get("step") or 0.0
    if not step:
        return []
    out: list[tuple[float, Candidate]] = []

    def share(part: str) -> float:
        return (medians.get(part) or 0.0) / step

    opts = job.optimizer_options
    if share("optimizer") >= MIN_SHARE and not opts.get("fused") and not opts.get("compiled"):
        why = f"the optimizer step takes {share('optimizer'):.0%} of the step"
        if opts.get("foreach") is not True:
            out.append((share("optimizer"), Candidate("foreach", "optimizer", why)))
        if job.optimizer in FUSED:
            out.append((share("optimizer") - 1e-6, Candidate("fused", "optimizer", why)))
    if share("data") >= MIN_SHARE and not job.loaders.get("workers"):
        why = f"the data loader's next batch takes {share('data'):.0%} of the step, in the main process"
        out.append((share("data"), Candidate("workers", "data", why)))
    causes = {b.cause for b in report.graph_breaks}
    if "item" in causes:
        out.append((share("forward"), Candidate(
            "scalars", "forward", "a graph break at .item() splits the forward"
        )))  # fmt: skip
    if "dynamic_output_shape" in causes:
        out.append((share("forward"), Candidate(
            "dynamic_ops", "forward", "a graph break at an op whose output shape depends on data"
        )))  # fmt: skip
    bound = job.bound
    if bound is not None and bound.part == "host":
        out.append((bound.share, Candidate("cudagraphs", "", bound.why)))
    t = report.timings
    if t is not None and any(k.peak_unit == "fp32" and k.op.startswith(GEMMS) for k in t.kernels):
        out.append((0.0, Candidate("tf32", "", "float32 matmuls run without TF32")))
    return [c for _, c in sorted(out, key=lambda x: -x[0])]


def measured(
    c: Candidate, before: Report, before_run: JobRun, after: Report | None, after_run: JobRun,
    failure: str = "",
) -> Tried:  # fmt: skip
    """One remedy's run against the unchanged run's, over the same window."""
    made = [m for p in after_run.processes for m in p.remedies if m.remedy == c.remedy]
    code = made[0].what if made else c.remedy
    where = next((f"{m.file}:{m.line}" for m in made if m.file), "")
    tried = Tried(c.remedy, code, where, part=c.part)
    tried.graph_breaks = len(before.graph_breaks)
    tried.recompiles = len(before.recompiles)
    b_steps, b_part = _window(before_run, c.part)
    tried.step_ms, tried.part_ms = _median(b_steps), _median(b_part)
    if failure:
        tried.why = failure
        return tried
    if not made:
        tried.why = "not made: the job made no object it applies to (or imported torch otherwise)"
        return tried
    if after is None:
        tried.why = "its run wrote no trace"
        return tried
    tried.graph_breaks_after = len(after.graph_breaks)
    tried.recompiles_after = len(after.recompiles)
    a_steps, a_part = _window(after_run, c.part)
    tried.step_ms_after, tried.part_ms_after = _median(a_steps), _median(a_part)
    tried.loss_match, tried.losses = _losses(before_run, after_run, c.remedy)
    tried.kept, tried.why = _judge(tried, b_steps, a_steps)
    return tried


def _window(run: JobRun, part: str) -> tuple[list[float], list[float]]:
    """The lowest rank's window: each training step's time, and its `part`'s."""
    p = _first(run)
    if p is None or p.profiled is None:
        return [], []
    profiled = training_profile(p.profiled, work_steps(run.processes))
    steps = [row[0] for row in profiled.per_step]
    column = list(step_medians(profiled)).index(part) if part else 0
    return steps, [row[column] if column < len(row) else 0.0 for row in profiled.per_step]


def _first(run: JobRun) -> ProcessRuntime | None:
    return next((p for p in run.processes if p.calls), None)


def _median(xs: list[float]) -> float | None:
    return round(statistics.median(xs), 6) if xs else None


def _spread(xs: list[float]) -> float:
    if len(xs) < 4:
        return 0.0
    q = statistics.quantiles(xs, n=4)
    return q[2] - q[0]


def _losses(before: JobRun, after: JobRun, remedy: str) -> tuple[bool | None, str]:
    """Whether the window's losses matched, and in words. Compared only where both runs are
    seeded alike (torch's initial seed the same in both: an unseeded job draws another
    each run) and both kept losses for the same steps."""
    a, b = _first(before), _first(after)
    if a is None or b is None or not a.losses or not b.losses:
        return None, "losses not compared (none kept)"
    if a.seed is None or a.seed != b.seed:
        return None, "losses not compared (the job is not seeded: each run draws its own)"
    steps = sorted(set(a.losses) & set(b.losses), key=int)
    pairs = [(x, y) for s in steps for x, y in zip(a.losses[s], b.losses[s], strict=False)]
    if not pairs:
        return None, "losses not compared (no step in both)"
    rtol = LOSS_RTOL_TF32 if remedy == "tf32" else LOSS_RTOL
    worst = max(abs(y - x) / max(abs(x), 1e-12) for x, y in pairs)
    if worst == 0:
        return True, f"losses match exactly over {len(steps)} steps"
    if worst <= rtol:
        return True, f"losses match over {len(steps)} steps (within {worst:.1e})"
    return False, f"losses differ over {len(steps)} steps (by up to {worst:.1%})"


def _judge(t: Tried, before: list[float], after: list[float]) -> tuple[bool, str]:
    """Kept, or why not: the step improved beyond the runs' spread (and by MIN_GAIN), and
    no more breaks or recompiles, and no loss that differs."""
    if t.step_ms is None or t.step_ms_after is None:
        return False, "not kept: no window step measured in one of the runs"
    worse = []
    if t.graph_breaks_after > t.graph_breaks:
        worse.append(f"graph breaks {t.graph_breaks} → {t.graph_breaks_after}")
    if t.recompiles_after > t.recompiles:
        worse.append(f"recompiles {t.recompiles} → {t.recompiles_after}")
    if t.loss_match is False:
        worse.append("the losses differ")
    if worse:
        return False, f"not kept: {'; '.join(worse)}"
    spread = (_spread(before) + _spread(after)) / 2
    if t.step_ms - t.step_ms_after <= max(spread, MIN_GAIN * t.step_ms):
        if spread >= MIN_GAIN * t.step_ms:
            return False, f"not kept: within the runs' spread ({ms(spread)})"
        return False, f"not kept: less than {MIN_GAIN:.0%} faster"
    return True, "kept"
