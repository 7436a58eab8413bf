"""What the compiled entry's calls ran. The recompile limit, call by call (#67): for a frame that hit it and is the compiled
entry's own, which of the entry's later calls ran a graph torch had and which ran in eager
mode, their shapes and what each took per unit of work, from the probe's tally of the
entry's calls (`ProcessRuntime.entry_calls`); and the torch.compile call that set it up."""

from __future__ import annotations

import re
import statistics

from compilediag.analysis.source import code_at
from compilediag.harness.worker_types import ProcessRuntime
from compilediag.report.compile import LimitHit

FRAME = re.compile(r"(\d+)/\d+$")  # a compile id's frame (`0/8`, `r1:0/8`)


def limit_calls(hits: list[LimitHit], p: ProcessRuntime) -> list[int]:
    """Each hit of `p`'s first frame (the one its first compiled entry runs), told call by
    call; every hit gets the torch.compile call of that entry, where the probe saw it.
    Returns the steps whose call of that entry ran in eager mode past the limit."""
    eager_steps: list[int] = []
    first = next((c for c in p.entry_calls if c[4]), None)  # the call that made a graph first
    if first is None:
        return eager_steps
    key = first[1]
    call = next((c for c in p.compile_calls if c.key == key and c.file), None)
    for hit in hits:
        frame = FRAME.search(hit.compile_id)
        if frame is None or p.first_frame is None or int(frame.group(1)) != p.first_frame:
            continue
        if call is not None:
            hit.compile_file, hit.compile_line = call.file, call.line
            hit.compile_code = code_at(call.file, call.line)
        mine = [c for c in p.entry_calls if c[1] == key]
        past = next((i for i, c in enumerate(mine) if not c[3] and not c[4]), None)
        if past is None:
            continue
        later = mine[past:]
        hit.step = int(later[0][0])
        cached = [c for c in later if c[3]]
        eager = [c for c in later if not c[3] and not c[4]]
        hit.cached_calls, hit.eager_calls = len(cached), len(eager)
        hit.cached_shapes = list(dict.fromkeys(str(c[2]) for c in cached))
        hit.eager_shapes = list(dict.fromkeys(str(c[2]) for c in eager))
        eager_steps += sorted({int(c[0]) for c in eager})
        if "cuda" not in p.devices:
            hit.cached_ms_per_k, hit.eager_ms_per_k = _per_k(cached), _per_k(eager)
    return eager_steps


def _per_k(calls: list[list]) -> float | None:
    """Their host time per 1,000 elements of each call's first tensor: the calls' median
    (one call a busy machine held up moves no median)."""
    each = [float(c[5]) / int(c[6]) * 1e3 for c in calls if int(c[6])]
    return round(statistics.median(each), 6) if each else None
