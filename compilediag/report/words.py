"""Figures in words, for the analysis' findings and the renderers alike: a count and its
noun, a per-call time, a ratio, a share, a cache's hits and misses."""

from __future__ import annotations

import math

# where a recompile's advice goes on to what else its call changed (analysis/recompiles'
# also_said); a renderer that gives one fix for several recompiles says only that part again
# (one of each cached graph's: the `failed` line is the nearest graph's, not always torch's
# first: a look read "only the first" as the guard shown)
ONE_GUARD = "torch names one failed guard of each cached graph;"
ALSO_CHANGED = f" {ONE_GUARD} this call also changed "

# what a break's eager time (GraphBreak.time_lost_ms) is worth removed: not all of it (a
# look: a Transformer's break "costs 11.4 ms a step", the fix applied and the step the same)
BREAK_SAVES = "removing the break saves that less the same code's compiled time"


def plural(n: int, word: str) -> str:
    """`1 step`, `2 steps`: the word's plural after any count but 1."""
    return f"{n} {word}{'s' * (n != 1)}"


def ms(value: float) -> str:
    """A per-call time: 0.214 ms, 1.52 ms, 12.3 ms; below a microsecond, its own digits
    (0.00042 ms), never "0.000 ms" for a time that is not zero; from a second on, seconds
    as `seconds()` writes them (1.49 s, not 1.49e+03 ms)."""
    if value >= 999.5:
        return seconds(value / 1e3)
    if value >= 1:
        return f"{value:.3g} ms"
    if value >= 0.001 or value <= 0:
        return f"{value:.3f} ms" if value else "0 ms"
    # (f"{8.8e-05:.2g}" is "8.8e-05": a look read it beside "0.005 ms")
    places = 1 - math.floor(math.log10(value))  # two significant digits, never an exponent
    return f"{value:.{places}f}".rstrip("0") + " ms"


def times(x: float, unit: bool = True) -> str:
    """A ratio in at most 3 significant figures: `1.96×`, `25.6×`, `0.983×`, `142×`."""
    text = f"{x:.2f}" if x < 10 else f"{x:.1f}" if x < 100 else f"{x:.0f}"
    if x < 1:
        text = f"{x:.3f}".rstrip("0").rstrip(".") if x >= 0.1 else f"{x:.3g}"
    return text + ("×" if unit else "")


def seconds(value: float | None) -> str:
    """A compile's time in 3 significant digits: 231 ms, 6.13 s, 17.6 s, 236 s; "-" where
    there is none."""
    if value is None:
        return "-"
    if round(value * 1e3) < 1000:
        return f"{value * 1e3:.0f} ms"
    places = 2 if round(value, 2) < 10 else 1 if round(value, 1) < 100 else 0
    return f"{value:.{places}f} s"


CACHE_NAMES = {"fx_graph": "FX graph", "aotautograd": "AOTAutograd"}


def cache_text(
    caches: dict[str, int], cold: bool = False, bypasses: dict[str, dict[str, int]] | None = None
) -> str:
    """{"fx_graph_cache_hit": 1, ...} -> `FX graph: 1 hit · AOTAutograd: 10 bypass (FX graph
    cache is not enabled)`: a bypass with the reasons torch gave (`bypasses`)."""
    parts = []
    for cache, name in CACHE_NAMES.items():
        states = [
            f"{caches[k]} {state}" for state in ("hit", "miss", "bypass")
            if (k := f"{cache}_cache_{state}") in caches
        ]  # fmt: skip
        reasons = (bypasses or {}).get(cache) or {}
        if reasons and states:
            states[-1] += " (" + "; ".join(
                why + (f": {n}" if len(reasons) > 1 else "") for why, n in reasons.items()
            ) + ")"  # fmt: skip
        if states:
            parts.append(f"{name}: {', '.join(states)}")
    return " · ".join(parts) + (" (private, empty caches: --cold)" if cold else "")


def steps_words(steps: list[int]) -> str:
    """`steps 9-18`, `steps 10-12, 14-18, 20`: those that follow each other as a run."""
    runs: list[list[int]] = []
    for n in sorted(steps):
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    said = ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)
    return ("step " if len(steps) == 1 else "steps ") + said


def steps_listed(steps: list[int], shown: int = 6) -> str:
    """`1, 7, 13`: the first `shown` of them, and how many more."""
    more = f" and {len(steps) - shown} more" if len(steps) > shown else ""
    return ", ".join(map(str, steps[:shown])) + more


def work_when(steps: list[int], between: bool, last: int = 0, shown: int = 6) -> str:
    """When other work ran, opening a bracket the caller closes: `in 3 steps (1, 7, 13`; where
    it ran between steps (before the step's training call), in the job's own numbering, a
    step ending at its optimizer's: `3 times (before the first step, after steps 6, 12`; work
    past the job's `last` step (a checkpoint after the last epoch, in a step that never
    ended): `6 times (in steps 17, 33, 49, 65, 81; after the last step, 96` (a look read
    "step 97" of a 96-step job)."""
    if last and steps and steps[-1] > last and not between:
        inside = [n for n in steps if n <= last]
        within = f"in step{'s' if len(inside) > 1 else ''} {steps_listed(inside, shown)}; "
        return (
            f"{len(steps)} time{'s' if len(steps) != 1 else ''} ({within if inside else ''}"
            f"after the last step, {last}"
        )
    if not between:
        return f"in {len(steps)} step{'s' if len(steps) != 1 else ''} ({steps_listed(steps, shown)}"
    said = ["before the first step"] if steps and steps[0] <= 1 else []
    after = [n - 1 for n in steps if n > 1]
    if after:
        said.append(f"after step{'s' if len(after) > 1 else ''} {steps_listed(after, shown)}")
    return f"{len(steps)} time{'s' if len(steps) != 1 else ''} ({', '.join(said)}"


# what a sharding wrapper's hooks do, in forward and in backward (Breakdown.wrapper)
FSDP_HOOKS = ("its all-gathers, the waits in them, reshard",
              "its all-gathers, reduce-scatters and the waits in them")  # fmt: skip
WRAPPER_HOOKS = {"FSDP2": FSDP_HOOKS, "FSDP1": FSDP_HOOKS}


def forward_split(in_graphs: float, between: float, hooks: float, module: float,
                  wrapper: str, in_call: float = 0.0, eager_rest: str = "") -> str:  # fmt: skip
    """`in graphs 4.9 ms · Python between them 0.44 ms · the calls' own 0.12 ms (Dynamo's
    guard checks and its code around the graphs)`, and in a sharded model's forward
    `· FSDP2's hooks 13.1 ms (its all-gathers, …) · eager code around the compiled calls
    1.2 ms`."""
    said = f"in graphs {ms(in_graphs)} · Python between them {ms(between)}"
    if in_call and eager_rest:  # (Breakdown.eager_rest: a break torch did not resume after)
        said += (
            f" · the calls' own {ms(in_call)} (the rest of {eager_rest} in eager mode: torch "
            "could not resume after that break; Dynamo's guard checks with it)"
        )
    elif in_call:
        said += (
            f" · the calls' own {ms(in_call)} (Dynamo's guard checks and its code around the "
            "graphs)"
        )
    if wrapper:
        what = WRAPPER_HOOKS.get(wrapper, ("", ""))[0]
        said += f" · {wrapper}'s hooks {ms(hooks)}" + (f" ({what})" if what else "")
        said += f" · eager code around the compiled calls {ms(module)}"
    return said


def backward_split(hooks: float, wrapper: str, eager: float | None = None) -> str:
    """` (of it FSDP2's hooks 12.3 ms: its all-gathers, …)`; ` (of it 77.3 ms outside the
    compiled graphs: the eager code's)` where a break's rest ran eager (`eager`); ''
    without either."""
    said = [f"{ms(eager)} outside the compiled graphs: the eager code's"] if eager else []
    if wrapper:
        what = WRAPPER_HOOKS.get(wrapper, ("", ""))[1]
        said.append(f"{wrapper}'s hooks {ms(hooks)}" + (f": {what}" if what else ""))
    return f" (of it {'; '.join(said)})" if said else ""


def percent(share: float) -> str:
    """`12%`; `<1%` for a share that is not zero but rounds to it (0.279 ms of a 100 ms
    call is not "0%")."""
    said = f"{share:.0%}"
    return "<1%" if share > 0 and said == "0%" else said


def what_changed(guard_words: str) -> str:
    """A failed guard's words up to their explanation: `x dim 0 changed 2 → 4` of `x dim 0
    changed 2 → 4: ...`; a ': ' inside a quoted line or parentheses (`lengths` (line 25:
    `...`)[0] changed (was 8)) is the value's name, not the end."""
    depth, quoted = 0, False
    for i, ch in enumerate(guard_words):
        if ch == "`":
            quoted = not quoted
        elif not quoted and ch in "([":
            depth += 1
        elif not quoted and ch in ")]":
            depth = max(depth - 1, 0)
        elif ch == ":" and not quoted and not depth and guard_words[i + 1 : i + 2] == " ":
            return guard_words[:i]
    return guard_words


def short_name(function: str) -> str:
    """`estimate_loss` of `main.<locals>.estimate_loss`; a method keeps its class; a
    script's own lines, not `<module>` (look 28: "checkpoint <module> (train.py:288)")."""
    return (
        "the script's top level" if function == "<module>" else function.rsplit("<locals>.", 1)[-1]
    )
