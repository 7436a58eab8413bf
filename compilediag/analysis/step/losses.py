"""run --check-numerics: where the job's compiled losses part from the same seeded steps
run eagerly, beyond eager's own run-to-run spread (two eager runs)."""

from __future__ import annotations

from compilediag.analysis.step.runtime import JobRun
from compilediag.harness.worker_types import ProcessRuntime
from compilediag.report.numerics import LossCheck
from compilediag.report.words import plural

MARGIN = 3.0  # compiled may part from eager by this many times eager's own spread
FLOOR = 1e-3  # and by this share of the loss, whatever the spread (float32 rounding that
# training amplifies over steps reads as parting on a machine whose eager runs agree bit
# for bit)


def _losses(run: JobRun) -> ProcessRuntime | None:
    """The first process (rank 0 where ranks run) that kept losses."""
    kept = [p for p in run.processes if p.losses]
    return min(kept, key=lambda p: p.rank or 0) if kept else None


def _by_step(p: ProcessRuntime) -> dict[int, float]:
    """The step's loss (its last backward's, where a step ran several)."""
    return {int(s): xs[-1] for s, xs in p.losses.items() if xs}


def parting(compiled: JobRun, eager: list[JobRun]) -> LossCheck:
    """The first step whose compiled loss parts from eager's beyond MARGIN times the eager
    runs' widest difference so far (at least FLOOR of the loss)."""
    out = LossCheck()
    c = _losses(compiled)
    es = [p for p in (_losses(e) for e in eager) if p is not None]
    if c is None or len(es) < 2:
        out.words = (
            "not compared: the job kept none "
            + ("when compiled" if c is None else "with torch.compile off")
            + " (a loss is the scalar backward() is called on)"
        )
        return out
    if c.seed is None or any(e.seed != c.seed for e in es):
        out.words = (
            "not compared: the job is not seeded (each run draws its own weights); "
            "call torch.manual_seed(N) before the model is made"
        )
        return out
    cs, e1, e2 = _by_step(c), _by_step(es[0]), _by_step(es[1])
    steps = sorted(set(cs) & set(e1) & set(e2))
    out.steps = len(steps)
    spread = 0.0
    widest: tuple[float, int] = (-1.0, 0)
    for s in steps:
        scale = max(abs(e1[s]), 1e-12)
        spread = max(spread, abs(e2[s] - e1[s]) / scale)
        gap = abs(cs[s] - e1[s]) / scale
        tol = max(MARGIN * spread, FLOOR)
        if gap > tol and out.first_step is None:
            out.first_step = s
            widest = (gap, s)
            out.spread, out.tolerance = spread, tol
            break
        if gap > widest[0]:
            widest = (gap, s)
            out.spread, out.tolerance = spread, tol
    if not steps:
        out.words = "not compared: no step logged a loss in all three runs"
        return out
    gap, s = widest
    out.gap, out.compiled, out.eager = round(gap, 6), cs[s], e1[s]
    own = f"eager's own runs differ by at most {out.spread:.1%}"
    if out.first_step is None:
        # (a look read "widest gap 0.00% at step 1" where no step differed)
        widest_words = (
            "equal at every step" if not gap
            else f"widest gap {gap:.2%} at step {s}" if gap >= 5e-5
            else f"widest gap under 0.01% at step {s}"
        )  # fmt: skip
        out.words = (
            f"follow eager over {plural(len(steps), 'step')} ({widest_words}; "
            f"{own}; tolerance {out.tolerance:.2%})"
        )
    else:
        out.words = (
            f"part from eager at step {s}: compiled {cs[s]:.6g}, eager {e1[s]:.6g} "
            f"({gap:.2%} apart; {own}, tolerance {out.tolerance:.2%})"
        )
    return out


# torch's accuracy minifier: on a script, the graph whose compiled outputs depart from eager
MINIFIER = "TORCHDYNAMO_REPRO_AFTER=aot TORCHDYNAMO_REPRO_LEVEL=4 python YOUR_SCRIPT"


def with_cause(check: LossCheck, random_fallback: LossCheck | None) -> LossCheck:
    """The cause of a parting, from the job run compiled once more with Inductor drawing
    random numbers as eager does (torch._inductor.config.fallback_random): where its losses
    then follow eager, random numbers (dropout); else an op, which torch's accuracy
    minifier finds on the script itself."""
    if check.first_step is None or random_fallback is None:
        return check
    if random_fallback.first_step is None and random_fallback.steps:
        check.cause = "random"
        check.words += (
            f"; with torch._inductor.config.fallback_random = True they follow eager over "
            f"{random_fallback.steps} steps: Inductor draws other random numbers than eager "
            "(dropout and the like), no op computes wrong; set it only to compare runs"
        )
    else:
        check.cause = "op"
        check.words += (
            "; with torch._inductor.config.fallback_random = True they part too, so it is not "
            f"random numbers: an op departs. To find its graph: {MINIFIER}"
        )
    return check
