"""`compilediag diff`'s timings: the compiled call and the job's step, each change judged
against the runs' own spread, eager beside it, and whether the cores were busy."""

from __future__ import annotations

from compilediag.analysis.diff.model import Change, ChangeKind
from compilediag.harness.threads import SLACK
from compilediag.report.model import Report, Timings
from compilediag.report.words import ms, times


def timing_changes(a: Report, b: Report, tolerance: float) -> list[Change]:
    """The compiled call (explain) and the job's step (run), where both have them: a change
    within the runs' own spread (their IQRs) or the tolerance is the same; so is a compiled
    call whose median moved while its fastest block did not (within the tolerance): every
    call runs the same code on the same inputs, so what moved the median was the machine's
    load (a run beside another job on two cores: 20% and more)."""
    out = []
    ta, tb = a.timings, b.timings
    if ta and tb and ta.compiled_ms and tb.compiled_ms:
        sa, sb = ta.compiled_ms, tb.compiled_ms
        fastest = (sa.min, sb.min) if sa.min and sb.min else None
        timed = _timed("compiled call", sa.median, sb.median, sa.iqr + sb.iqr, tolerance, fastest)
        if timed.kind == ChangeKind.CHANGED:
            timed = _against_eager(timed, ta, tb, tolerance) or timed
            timed = _busy(timed, ta, tb) or timed
        out.append(timed)
    ba = ta.breakdown if ta else None
    bb = tb.breakdown if tb else None
    if ba is not None and bb is not None and a.runtime is not None and b.runtime is not None:
        out.append(_timed("a step", ba.call_ms, bb.call_ms, 0.0, tolerance))
        va, vb = a.runtime.bound, b.runtime.bound
        if va is not None and vb is not None and va.part != vb.part:
            flip = f"bound by {va.part} ({va.share:.0%} of the step) → {vb.part} ({vb.share:.0%})"
            if va.close == vb.part and vb.close == va.part:  # each run had the other close behind
                out.append(Change(ChangeKind.SAME, f"{flip}, the same: each run has the other "
                                  "close behind it (either may lead from run to run)"))  # fmt: skip
            else:
                out.append(Change(ChangeKind.CHANGED, flip))
        pa, pb = dict(ba.parts()), dict(bb.parts())
        for name in dict.fromkeys([*pa, *pb]):
            x, y = pa.get(name, 0.0), pb.get(name, 0.0)
            if abs(y - x) > tolerance * max(ba.call_ms, 1e-9):
                out.append(Change(ChangeKind.CHANGED, f"{name}: {ms(x)} → {ms(y)}"))
    return out


def _against_eager(timed: Change, ta: Timings, tb: Timings, tolerance: float) -> Change | None:
    """A compiled call that moved as much as eager did in the same runs is the same: eager
    ran in each process beside it, on the same machine, so a shift both share is the
    machine's (its clock, its load, the process's layout), not the compiled code's."""
    ea, eb, ca, cb = ta.eager_ms, tb.eager_ms, ta.compiled_ms, tb.compiled_ms
    if not (ea and eb and ca and cb and ea.median > 0 and eb.median > 0 and ca.median > 0):
        return None
    ra, rb = ca.median / ea.median, cb.median / eb.median
    if abs(rb - ra) > tolerance * ra:
        return None
    return Change(ChangeKind.SAME, f"{timed.text.split(' (')[0]}, the same against eager (eager "
                  f"{ms(ea.median)} → {ms(eb.median)} in the same runs; compiled/eager "
                  f"{ra:.2f} → {rb:.2f}, within {tolerance:.0%}: the machine moved both)")  # fmt: skip


def _busy(timed: Change, ta: Timings, tb: Timings) -> Change | None:
    """A change where either run was timed with its cores busy (torch's threads and the
    load beside the run more than the cores) is not compared: such figures can be many
    times the calls' cost, and not alike from run to run."""
    sides = [n for n, t in (("A", ta), ("B", tb)) if _oversubscribed(t)]
    if not sides:
        return None
    which = " and ".join(sides)
    return Change(ChangeKind.NOTE, f"{timed.text.split(' (')[0]}: not compared, {which} timed with "
                  "the cores busy (see its timing notes); time both on a quiet machine")  # fmt: skip


def _oversubscribed(t: Timings) -> bool:
    return bool(t.cores and t.load is not None and t.threads
                and t.threads + t.load > t.cores + SLACK)  # fmt: skip


def _timed(
    what: str, x: float, y: float, spread: float, tolerance: float,
    fastest: tuple[float, float] | None = None,
) -> Change:  # fmt: skip
    change = y - x
    if abs(change) <= max(spread, tolerance * x):
        why = "within the runs' own spread" if spread >= tolerance * x else (
            f"within {tolerance:.0%}"
        )  # fmt: skip
        return Change(ChangeKind.SAME, f"{what}: {ms(x)} → {ms(y)}, the same ({why})")
    if fastest is not None and abs(fastest[1] - fastest[0]) <= tolerance * fastest[0]:
        fx, fy = fastest
        return Change(ChangeKind.SAME, f"{what}: {ms(x)} → {ms(y)}, the same (the fastest blocks "
                      f"{ms(fx)} → {ms(fy)}, within {tolerance:.0%}: the medians moved "
                      "with the machine's load)")  # fmt: skip
    return Change(
        ChangeKind.CHANGED, f"{what}: {ms(x)} → {ms(y)} ({times(y / x)})", regression=y > x
    )
