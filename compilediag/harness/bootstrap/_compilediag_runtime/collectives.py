"""The window's collectives, from what torch's process groups record anyway: the Flight
Recorder, a ring of each process group's last collectives (on by default: 2,000 entries on
gloo and NCCL), read once when the window is over. Each entry keeps its process group, its
sequence number on that group (the same call on every rank), its name, when this rank's
host enqueued it (`time_created_ns`, the wall clock: the rank's arrival) and, where torch
timed it on the device (NCCL with TORCH_NCCL_ENABLE_TIMING=1), its duration.

Nothing is switched on: reading the ring costs the job one dump at the window's end,
outside its steps. Each entry is given to the window's step whose wall-clock span holds its
enqueue; set beside the same entry on the other ranks (analysis/step/waits.py), it tells
how long this rank waited for the last one to arrive."""

from __future__ import annotations

import json
import sys
from typing import Any

MAX_ENTRIES = 20000  # kept at most (a window of many steps of a model of many buckets)


def window_collectives(spans: dict[int, tuple[int, int]]) -> list[list[Any]]:
    """The Flight Recorder's collectives enqueued in the window's steps (`spans`: step ->
    its start and end, time.time_ns()): [process group, sequence number, name, enqueued
    (ns), duration (ms) or None, step], in the order they were enqueued. [] where torch has
    no recorder to read or nothing was recorded."""
    if not spans:
        return []
    out: dict[tuple[str, int, str], list[Any]] = {}
    bounds = sorted((a, b, step) for step, (a, b) in spans.items())
    for entry in _entries():
        try:
            if entry.get("is_p2p"):
                continue
            created = int(entry["time_created_ns"])
            group = entry.get("process_group") or [str(entry.get("pg_id", ""))]
            key = (str(group[0]), int(entry["collective_seq_id"]), str(entry["profiling_name"]))
        except (KeyError, TypeError, ValueError):
            continue
        step = next((s for a, b, s in bounds if a <= created < b), None)
        if step is None or key in out:
            continue
        duration = entry.get("duration_ms")
        out[key] = [*key, created, float(duration) if duration is not None else None, step]
    return sorted(out.values(), key=lambda e: e[3])[:MAX_ENTRIES]


def _entries() -> list[dict[str, Any]]:
    """Every recorder's entries: gloo's (and any CPU backend's) and NCCL's."""
    c10d = getattr(sys.modules.get("torch"), "_C", None)
    c10d = getattr(c10d, "_distributed_c10d", None)
    if c10d is None:
        return []
    found: list[dict[str, Any]] = []
    for dump in ("_dump_fr_trace_json", "_dump_nccl_trace_json"):
        fn = getattr(c10d, dump, None)
        if fn is None:
            continue
        try:
            data = json.loads(fn(True, False))
        except Exception:  # noqa: BLE001 - a recorder this build lacks, or off
            continue
        entries = data.get("entries") if isinstance(data, dict) else None
        found += [e for e in entries or [] if isinstance(e, dict)]
    return found
