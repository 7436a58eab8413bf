"""What the tool's own instruments and run cost, in words (#74): a `run` window's pace
against the job's own (the first screen's line) and the steps that stalled
(views.window_notes gives them their place); what explain's own run took, by phase; the
loop's costliest lines by the job's own clock; the kernel profile's kernels, timed in the
steps after the window, and what it named of the step's rest."""

from __future__ import annotations

from collections.abc import Sequence

from compilediag.analysis.step.other_work import STALL
from compilediag.analysis.step.pace import APART, SLOW
from compilediag.render import ms, plural, seconds
from compilediag.report.model import Breakdown, KernelTiming, LoopLine, Runtime
from compilediag.report.step import RestPart
from compilediag.report.vocabulary import RestKind
from compilediag.report.words import steps_words, times


def pace_line(r: Runtime | None) -> str:
    """The window's pace against the job's own, in one line for the first screen (#74): what
    its instruments cost a step, and what the figures below are set on. "" without a
    window that timed a step."""
    if r is None or not r.window or not r.window_step_ms:
        return ""
    window, own = ms(r.window_step_ms), "the figures below are the window's, its instruments on"
    if r.window_work == "unlike":
        return (
            f"pace: the window's steps took {window} (the median); not set against the steps "
            "around it, which ran other work (other shapes, or calls in eager mode past the "
            f"recompile limit): {own}"
        )
    around = f"{plural(r.unprofiled_steps, 'step')} around it, no instrument on"
    if len(r.window_spread_ms) == 2:  # steps of two levels: pace.Pace.varies
        low, high = r.window_spread_ms
        own_pace = (
            f" from the job's own {ms(r.unprofiled_step_ms)} ({around})"
            if r.unprofiled_step_ms else ""
        )  # fmt: skip
        return (
            f"pace: the window's steps took {window} (the median), half of them between "
            f"{ms(low)} and {ms(high)}: they vary more than its instruments cost, so what "
            f"those cost is not told{own_pace}: {own}"
        )
    if r.window_work and r.window_cost is not None:  # other shapes: compared shape by shape
        ratio = 1 + r.window_cost
        if max(ratio, 1 / ratio) > APART:  # (a look read "the window 0.0258x the job's pace")
            return (
                f"pace: the window's steps took {window} (the median), {times(ratio, False)}x "
                f"the job's own shape by shape ({around}): {_moved(ratio)}: {own}"
            )
        return (
            f"pace: the window {times(ratio, False)}x the job's own pace ({around}, shape "
            f"by shape: they ran other shapes); {own}"
        )
    if r.pace_moved and r.before_step_ms and r.unprofiled_step_ms:
        return (
            f"pace: the window's steps took {window} (the median); the job's own pace moved "
            f"during the run, {ms(r.before_step_ms)} a step just before the window and "
            f"{ms(r.unprofiled_step_ms)} after it (no instrument on), so what the window's "
            f"instruments cost is not told apart from that: {own}"
        )
    if r.pace_apart and r.unprofiled_step_ms:
        return (
            f"pace: the window's steps took {window} (the median), "
            f"{times(r.window_step_ms / r.unprofiled_step_ms, False)}x the job's own "
            f"{ms(r.unprofiled_step_ms)} ({around}): {_moved(r.window_step_ms / r.unprofiled_step_ms)}: "
            f"{own}"
        )
    if not r.at_pace or r.unprofiled_step_ms is None or r.window_cost is None:
        after = r.kernel_step_numbers and r.window and min(r.kernel_step_numbers) > r.window[-1]
        few = (
            "too few steps before it to set that against (those after it follow the kernel "
            "profile, which slows them a while)"
            if after else "too few steps around it to set that against"
        )  # fmt: skip
        return f"pace: the window's steps took {window} (the median), with {few}: {own}"
    return (
        f"pace: the window {window} a step, {times(1 + r.window_cost, False)}x the job's own "
        f"{ms(r.unprofiled_step_ms)} ({around}{_mean(r)}); the figures below are set on the "
        "job's pace"
    )


def _mean(r: Runtime) -> str:
    """The steps around the window, where their mean is well over their median: what the
    figures set on the median leave out."""
    if not r.unprofiled_mean_ms:
        return ""
    slow = (
        f": {r.unprofiled_slow} of them took over {SLOW:g}x the median, a cost the figures "
        "below leave out"
        if r.unprofiled_slow else ""
    )  # fmt: skip
    return f"; their mean {ms(r.unprofiled_mean_ms)}{slow}"


def _moved(ratio: float) -> str:
    """Why a window this far from the job's own pace is not what its instruments cost."""
    if ratio < 1:  # instruments slow a step, never speed it
        return (
            "faster than its instruments allow, so the steps around it were held up (stalls, "
            "other work on the machine)"
        )
    return "more than its instruments cost, so the machine's pace moved between them (other work on it)"


def stalled_words(r: Runtime) -> str:
    """The window's steps that stalled, each against the window's median step (more than
    STALLS_LISTED: counted, their range), what of it Python's garbage collector took where
    it took most of the pause, and the machine's load where it was busy (other_work.
    stalled_steps decides)."""
    usual = r.window_step_ms or r.step_medians.get("step") or 0.0
    against = f" the window's median step ({ms(usual)})" if usual else ""
    said, by_gc = [], bool(r.window_stalled_gc)
    if len(r.window_stalled) > STALLS_LISTED and not by_gc:
        times = sorted(r.window_stalled.values())
        of = r.window_steps + len(r.window_stalled)
        span = f"{ms(times[0])} to {ms(times[-1])}"
        said.append(
            f"{len(times)} of {of} steps stalled, {span}"
            + (f", {times[0] / usual:.0f}-{times[-1] / usual:.0f}x{against}" if usual else "")
        )
    for n, t in r.window_stalled.items() if not said else ():
        text = f"step {n} took {ms(t)}" + (f", {t / usual:.0f}x{against}" if usual else "")
        if n in r.window_stalled_gc:  # the collector took most of the pause
            text += f", {ms(r.window_stalled_gc[n])} of it in Python's garbage collector"
        elif n in r.window_stalled_at:  # the job's own lines took most of it
            text += f", at {lines_said(r.window_stalled_at[n])}"
        said.append(text)
    them = "it" if len(r.window_stalled) == 1 else "them"
    own = [n for n in r.window_stalled if n in r.window_stalled_at]
    load, cores = (r.window_load + [0.0, 0.0])[:2]
    if by_gc:
        why = (
            "a full collection walks every object the job holds; gc.freeze() once the model "
            "and data are set up keeps those out of later collections"
        )
    elif own and len(r.window_stalled) <= STALLS_LISTED:
        why = (
            f"the job's own work at {'that line' if _one_line(r, own) else 'those lines'}, "
            "which its other steps do not do"
            + ("" if len(own) == len(r.window_stalled) else "; the others a pause (a library's "
               "lazy start, the machine)")
        )  # fmt: skip
    else:
        why = "a pause (a library's lazy start, the machine)"
    if cores and load >= BUSY * cores:
        why += f"; the machine was busy: load {load:.1f} on {plural(int(cores), 'core')}"
    return (
        f"{'; '.join(said)}; no compile and no evaluation in {them}: not the "
        f"training step's cost, left out of these figures on every rank; {why}"
    )


def _one_line(r: Runtime, steps: list[str]) -> bool:
    return len({(x.file, x.line) for n in steps for x in r.window_stalled_at[n]}) == 1


STALLS_LISTED = 3  # stalled steps said one by one; more are counted
BUSY = 0.9  # a load average this share of the cores or more: the machine was busy


def took_words(took: dict[str, float]) -> str:
    """What compilediag's own run took (report.took_s): "compilediag's run, 31.2 s: compile
    and first calls 14.8 s · timing 9.1 s · ...", largest first, phases under 1% of it
    counted, not named."""
    total = sum(took.values())
    shown = sorted((p for p in took.items() if p[1] >= total / 100), key=lambda p: -p[1])
    rest = len(took) - len(shown)
    words = " · ".join(f"{name} {seconds(s)}" for name, s in shown)
    return f"compilediag's run, {seconds(total)}: {words}" + (
        f" · {plural(rest, 'other phase')} under 1% each" if rest else ""
    )


LOOP_LINES = 4  # the loop's costliest lines shown
SOURCE_CHARS = 40  # of each line's text


def lines_said(lines: list[LoopLine]) -> str:
    """`train.py:12 `loss.backward()` 3.1 ms · :14 `opt.step()` 1 ms`: each line with its
    text (cut at SOURCE_CHARS) and its time, a file named where it changes."""

    def text(source: str) -> str:
        return source if len(source) <= SOURCE_CHARS else source[: SOURCE_CHARS - 1] + "…"

    return " · ".join(
        f"{'' if i and x.file == lines[i - 1].file else x.file}:{x.line}"
        + (f" `{text(x.source)}`" if x.source else "")
        + f" {ms(x.ms)}"
        for i, x in enumerate(lines)
    )


def loop_lines_words(r: Runtime) -> str:
    """The loop's costliest lines a step, each with its text, by the job's own clock."""

    shown = lines_said(sorted(r.loop, key=lambda x: -x.ms)[:LOOP_LINES])
    stalled = (
        f" ({steps_words(r.loop_stalled)} left out: the loop's lines took over "
        f"{STALL:g}x their median there, a pause)"
        if r.loop_stalled else ""
    )  # fmt: skip
    return (
        f"a step's costliest, by the job's own clock at each line over "
        f"{steps_words(r.loop_steps)}{stalled}: {shown}"
    )


KERNEL_KINDS = {"generated": "generated", "library": "library call", "device": "CUDA kernel"}


# the precision a report keeps a kernel's GB/s and TFLOP/s in (analysis/step/kernel_times.py rounds
# them to it); a rate is set only where the kernel moved bytes or did FLOPs, so a 0 there is
# a positive rate below it
RATE_PRECISION = 0.001


def rate(value: float, unit: str) -> str:
    """`0.011 TFLOP/s`, `1.2 TB/s` (for 1200 GB/s; `:.3g` alone writes `1.2e+03`); a
    positive rate that rounded to 0, `<0.001 TFLOP/s` (never `0`)."""
    if value < RATE_PRECISION:
        return f"<{RATE_PRECISION:g} {unit}"
    if unit == "GB/s" and value >= 1000:
        value, unit = value / 1000, "TB/s"
    return f"{value:.0f} {unit}" if value >= 1000 else f"{value:.3g} {unit}"


def kernel_achieved(k: KernelTiming, peak: str) -> str:
    """`1.2 TB/s, 36% of H100 80GB HBM3's peak` / `0.08 TFLOP/s`; '' where not measured."""
    if k.gb_per_s is not None:
        said = rate(k.gb_per_s, "GB/s")
    elif k.tflop_per_s is not None:
        said = rate(k.tflop_per_s, "TFLOP/s")
    else:
        return ""
    if k.peak_share is not None and peak:
        unit = {"fp32": " float32", "tf32": " TF32", "bf16": " bf16"}.get(k.peak_unit, "")
        said += f", {k.peak_share:.0%} of {peak.partition(':')[0]}'s{unit} peak"
        if k.peak_share > 1 and k.gb_per_s is not None:
            said += " (above its memory's: the data came from the L2 cache)"
    return said


def kernel_timing_words(k: KernelTiming, peak: str) -> list[str]:
    """A timed kernel's facts, in the order a reader weighs them."""
    calls = f"{k.calls:g} call{'s' * (k.calls != 1)} a step"
    facts = [f"{ms(k.ms)} a step ({k.share:.1%})", calls, KERNEL_KINDS.get(k.kind, k.kind)]
    if k.compile_id:
        facts.append(f"graph {k.compile_id}")
    achieved = kernel_achieved(k, peak)
    if achieved:
        facts.append(achieved)
    return facts


def _rest_ops(moved: list[RestPart], eager: list[RestPart], scale: float) -> list[str]:
    """The rest's ops the kernel profile named, its figures times `scale` (about all of the
    rest: set on it as shares; a look read "the rest 0.083 ms (of it: ... 0.101 ms")."""
    named = []
    if moved:
        copy = ", ".join(r.name for r in moved[:3])
        named.append(
            f"the batch's copy to the device {ms(scale * sum(r.ms for r in moved))} ({copy})"
        )
    if eager:
        total = sum(r.ms for r in eager)
        top = ", ".join(f"{r.name} {ms(scale * r.ms)}" for r in eager[:3] if r.ms >= total / 10)
        named.append(f"eager ops outside graphs {ms(scale * total)}: {top}")
    return named


def rest_named(b: Breakdown, device: bool = True, profiled: Sequence[int] = ()) -> str:
    """` (of it: eager ops outside graphs 3.1 ms: aten::mm 2 ms, aten::tanh 0.9 ms); 1 value
    read or wait for the device a step (aten::item: 0.02 ms on the host)`: what the kernel
    profile's steps named of the rest; '' where it named nothing. `device`: a GPU ran the
    steps (without one a value read waits for nothing: its reads alone are said);
    `profiled`: the kernel profile's steps (fewer reads than steps are counted over them,
    not made a rate)."""
    syncs = [r for r in b.rest if r.kind == RestKind.SYNC]
    moved = [r for r in b.rest if r.kind == RestKind.TO_DEVICE]
    eager = [r for r in b.rest if r.kind not in (RestKind.SYNC, RestKind.TO_DEVICE)]
    named = _rest_ops(moved, eager, 1.0)
    said, of = "", "of it and of forward's eager code" if b.wrapper else "of it"
    profiled_ms = sum(r.ms for r in moved + eager)
    if named and profiled_ms <= b.outside_ms + b.module_ms:
        said = f" ({of}: {'; '.join(named)})"
    elif named and b.rest_holds(profiled_ms):  # over the part, within the steps' difference
        shares = _rest_ops(moved, eager, (b.outside_ms + b.module_ms) / profiled_ms)
        said = (
            f" ({of}, about all, by the shares of torch.profiler's own steps: {'; '.join(shares)})"
        )
    elif named:  # the profiler's reading, larger than the part it would be of
        said = (
            f"; torch.profiler read {'; '.join(named)} a step, more than the job's clock gives "
            "the whole rest: the profiler's reading (on CPU its own cost; on CUDA host time "
            "that waits for the device), not this step's"
        )
    if syncs:  # on CUDA a wait for the device's work, which other parts hold: not "of it"
        reads = sum(r.calls for r in syncs)
        many = reads > 1

        def what(s: str) -> str:
            if device:
                return f"value read{s} or wait{s} for the device"
            return f"value read{s} (.item(), float())"

        total = round(reads * len(profiled))
        whole = abs(reads - round(reads)) < 0.05  # as many each step: a rate
        if reads >= 1 and (whole or not profiled):
            count = f"{round(reads) if whole else reads:g} {what('s' * many)} a step"
        elif profiled and total >= 1:  # reads some steps make: an epoch's end, a log
            count = (
                f"{total} {what('s' * (total > 1))} in the kernel profile's "
                f"{plural(len(profiled), 'step')} ({steps_words(list(profiled))})"
                + (", not each step" if reads < 1 else "")
            )
        else:
            count = f"a {what('')} every {1 / reads:.0f} steps"
        # (the rest's: a look counted nanoGPT's AdamW reads too, 48 against 33 said)
        said += (
            f"; {count}, outside the model, backward and the optimizer "
            f"({', '.join(r.name for r in syncs)}: {ms(sum(r.ms for r in syncs))} on the host)"
        )
    return said
