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
from compilediag.analysis.step_advice import FUSED
from compilediag.harness.worker_types import ProcessRuntime
from compilediag.report.model import Report, Tried
from compilediag.report.vocabulary import BreakCause
from compilediag.report.words import ms

# a part this share of the step is worth a run of its own
MIN_SHARE = 0.1
# a step this much shorter (and beyond the runs' spread) is an improvement
MIN_GAIN = 0.05
# the largest difference of two runs' losses over the window, as a share of the mean loss,
# that still matches: a remedy that keeps the job's arithmetic (workers, CUDA graphs, a
# value kept in the graph) within LOSS_RTOL; one that rounds otherwise drifts over the
# steps before the window: a fused AdamW's losses moved 0.9% of the mean by steps 20-30
# of a small MLP on an H100, where the unchanged job's own two runs differed by 4e-7
# (bench/results/gpu_try_fixes); TF32's 10-bit mantissa moves them further
LOSS_RTOL = 1e-3
LOSS_RTOL_BY = {"fused": 2e-2, "foreach": 2e-2, "tf32": 5e-2}


@dataclass
class Candidate:
    """A remedy the report calls for: its name (remedies.py's), the part it targets
    (step_medians' name; "" for the whole step), and why, in words."""

    remedy: str
    part: str
    why: str


def candidates(report: Report, cuda: bool = False) -> list[Candidate]:
    """The remedies this job's report calls for, most promising first (by the share of the
    step their part holds); `cuda`: the job's graphs ran on CUDA (where an optimizer left
    to torch's default already runs foreach)."""
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
        if job.optimizer in FUSED:  # one kernel for every parameter: tried first
            out.append((share("optimizer"), Candidate("fused", "optimizer", why)))
        if opts.get("foreach") is False or (opts.get("foreach") is None and not cuda):
            out.append((share("optimizer") - 1e-6, Candidate("foreach", "optimizer", why)))
    if share("data") >= MIN_SHARE and not job.loaders.get("workers"):
        why = f"the data loader's next batch takes {share('data'):.0%} of the step, in the main process"
        out.append((share("data"), Candidate("workers", "data", why)))
    causes = {b.cause for b in report.graph_breaks}
    if BreakCause.ITEM in causes:
        out.append((share("forward"), Candidate(
            "scalars", "forward", "a graph break at .item() splits the forward"
        )))  # fmt: skip
    if BreakCause.DYNAMIC_OUTPUT_SHAPE in causes:
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


@dataclass
class Noise:
    """The unchanged job's own run-to-run differences: its run under `run` against its
    unchanged run beside the remedies' (same window, same stop): the step's medians and
    the window's losses (the largest difference, a share of the mean loss; None where
    not compared)."""

    step_ms: float = 0.0
    loss: float | None = None


def noise_of(main: JobRun, control: JobRun) -> Noise:
    a, b = _median(_window(main, "")[0]), _median(_window(control, "")[0])
    step = abs(a - b) if a is not None and b is not None else 0.0
    return Noise(step, _loss_gap(main, control)[0])


def measured(
    c: Candidate, before: Report, before_run: JobRun, after: Report | None, after_run: JobRun,
    failure: str = "", noise: Noise | None = None,
) -> Tried:  # fmt: skip
    """One remedy's run against the unchanged one's (`before`: the job's run beside the
    remedies', alike in all but the remedy), over the same window."""
    noise = noise or Noise()
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
    tried.loss_match, tried.losses = _losses(before_run, after_run, c.remedy, noise.loss)
    tried.kept, tried.why = _judge(tried, b_steps, a_steps, noise.step_ms)
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


def _loss_gap(a_run: JobRun, b_run: JobRun) -> tuple[float | None, int, str]:
    """The largest difference of two runs' losses over the window's steps, as a share of
    the first run's mean loss there; the steps compared; or why they were not (None)."""
    a, b = _first(a_run), _first(b_run)
    if a is None or b is None or not a.losses or not b.losses:
        return None, 0, "losses not compared (none kept)"
    if a.seed is None or a.seed != b.seed:
        return None, 0, "losses not compared (the job is not seeded: each run draws its own)"
    lo, hi = a.window[:2] if len(a.window) >= 2 else (0, 1 << 30)
    steps = sorted((s for s in set(a.losses) & set(b.losses) if lo <= int(s) <= hi), key=int)
    pairs = [(x, y) for s in steps for x, y in zip(a.losses[s], b.losses[s], strict=False)]
    if not pairs:
        return None, 0, "losses not compared (no window step in both)"
    scale = max(statistics.fmean(abs(x) for x, _ in pairs), 1e-12)
    return max(abs(y - x) for x, y in pairs) / scale, len(steps), ""


def _losses(
    before: JobRun, after: JobRun, remedy: str, noise: float | None
) -> tuple[bool | None, str]:
    """Whether the window's losses matched, and in words: within LOSS_RTOL of the mean loss
    (a remedy that rounds otherwise: LOSS_RTOL_BY), or within three times the unchanged job's own
    run-to-run difference (a GPU's kernels may sum in another order each run). Compared
    only where both runs are seeded alike (torch's initial seed the same in both: an
    unseeded job draws another each run)."""
    gap, steps, why = _loss_gap(before, after)
    if gap is None:
        return None, why
    if gap == 0:
        return True, f"losses match exactly over {steps} steps"
    own = f"; the unchanged job's own runs: {noise:.1e}" if noise else ""
    rtol = LOSS_RTOL_BY.get(remedy, LOSS_RTOL)
    if gap <= max(rtol, 3 * (noise or 0.0)):
        return True, f"losses match over {steps} steps (within {gap:.1e} of the mean{own})"
    return False, f"losses differ over {steps} steps (by up to {gap:.1%} of the mean{own})"


def _judge(t: Tried, before: list[float], after: list[float], noise: float) -> tuple[bool, str]:
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
    # the runs' own spread: their steps' (IQR); the job's two unchanged runs are one pair,
    # too few to say a spread (on a loaded machine one of them may be slowed), so it is said
    spread = (_spread(before) + _spread(after)) / 2
    gain = t.step_ms - t.step_ms_after
    if gain <= max(spread, MIN_GAIN * t.step_ms):
        if spread >= MIN_GAIN * t.step_ms:
            return False, f"not kept: within the runs' spread ({ms(spread)})"
        return False, f"not kept: less than {MIN_GAIN:.0%} faster"
    if noise > gain:
        return True, f"kept (the job's two unchanged runs differed by {ms(noise)} a step)"
    return True, "kept"
