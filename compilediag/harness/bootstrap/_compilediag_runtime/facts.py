"""The probe's facts: what a process of the job did, as the JSON compilediag reads back
(worker_types.ProcessRuntime; the writer puts it in the job's folder, capture() reads it in
the process). Standard library only, as the whole package is."""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING, Any

from . import remedies
from .torch_state import _cudagraph_counts

if TYPE_CHECKING:
    from .probe import Probe


def process_facts(probe: Probe) -> dict[str, Any]:
    """What compilediag reads back (worker_types.ProcessRuntime)."""
    try:  # a window the job ended in: its complete steps
        probe.tally()
        if probe.kernels is not None:
            probe.kernels.stop(ended=True)
    except Exception:  # noqa: BLE001 - a CUDA context already gone: those steps unread
        probe._pending = []
    try:
        probe.reads.read_collectives()
    except Exception:  # noqa: BLE001 - a process group already destroyed: none read
        pass
    rank = os.environ.get("RANK")
    skips, rerecords = _cudagraph_counts()
    by_optimizer = probe.step_optimizer is not None
    # a job stepped at its model's calls that trained (grad on, train mode): a training job,
    # its evaluation's calls between its steps (from its first training call on)
    first = probe.other.first_trained
    entry_trains = not by_optimizer and probe.by_entry and first is not None
    trains = by_optimizer or entry_trains
    return {
        "pid": os.getpid(),
        "rank": int(rank) if rank and rank.isdigit() else None,
        "argv": list(sys.argv),
        "calls": dict(probe.calls),
        "entry_calls": [_entry_call(c) for c in probe.entry_calls],
        "first_frame": probe.first_frame,
        "training_frame": probe.training_frame,
        "steps": probe.optimizer_steps if by_optimizer else probe.steps,
        "steps_at": "optimizer" if by_optimizer else "entry" if probe.by_entry else "frame",
        "optimizer": probe.optimizer_name,
        "optimizer_options": dict(probe.optimizer_options),
        "skipped_steps": probe.skipped_steps,
        "loaders": dict(probe.loaders),
        **_kernel_facts(probe),
        "window": list(probe.window) if probe.window else [],
        "profiled": _profiled(probe),
        "compiled_steps": list(probe.compiled_steps),
        "gc_ms": {str(n): t for n, t in probe.gc_ms.items()},
        "load": list(probe.load),
        "window_collectives": probe.reads.collectives,
        "window_lines": probe.reads.line_facts,
        "no_grad_steps": probe.no_grad_steps,
        "eval_steps": probe.eval_steps,
        "plain_step_ms": [round(x * 1e3, 6) for x in probe.plain_step_s],
        "plain_steps": list(probe.plain_steps),
        "entry_trains": entry_trains,
        # a training job: its evaluations, and the graph calls they made
        "other_work": (
            probe.other.facts(0 if by_optimizer else first or 0, probe._depth > 0) if trains else []
        ),
        "evaluation_calls": dict(probe.other.calls) if trains else {},
        "backends": list(probe.backends),
        "compile_calls": [
            {**c, "called": key in probe.entered, "key": key}
            for key, c in probe.compile_calls.items()
        ],
        "devices": list(probe.devices),
        "wall_s": time.perf_counter() - probe.started,
        "window_end_s": probe.window_end_s,
        "last_step_s": probe.last_step_s,
        "exit_s": probe.exit_s,
        "cudagraph_skips": skips,
        "cudagraph_skip_reasons": list(dict.fromkeys(probe.skip_reasons)),
        "cudagraph_rerecords": rerecords,
        "tracing": probe.tracing.summary() if probe.tracing is not None else None,
        "losses": probe._loss_values(),
        "seed": _initial_seed() if probe.losses is not None else None,
        "remedies": list(remedies.applied),
    }


def _profiled(probe: Probe) -> dict[str, Any] | None:
    """The window's measured steps: their parts' means (worker_types.Profiled), and
    each step's own figures."""
    n = probe.measured_steps
    if not n:
        return None
    t, per = probe.total, 1e3 / n
    step, _, backward, optimizer, data, outside, evaluation, hooks, module, bhooks, call = t.row()
    return {
        "calls": n, "call_ms": step / n, "outside_ms": outside / n,
        "backward_ms": backward / n, "optimizer_ms": optimizer / n, "data_ms": data / n,
        "evaluation_ms": evaluation / n, "wrapper": probe.wrapper, "hooks_ms": hooks / n,
        "module_ms": module / n, "backward_hooks_ms": bhooks / n, "in_call_ms": call / n,
        "per_step": probe.per_step, "step_numbers": probe.step_numbers,
        "step_regions": probe.step_regions,
        "regions": [
            {"compile_id": c, "graph_ms": g, "gap_ms": gap, "backward_ms": bg,
             "backward_gap_ms": bgap}
            for c, (g, gap, bg, bgap) in t.regions(per).items()
        ],
    }  # fmt: skip


def _kernel_facts(probe: Probe) -> dict[str, Any]:
    k = probe.kernels
    if k is None:
        return {"kernels_off": not probe.profile_kernels}
    return {
        "kernels": k.rows, "kernel_steps": k.steps, "kernel_device": k.device,
        "kernel_step_numbers": list(k.step_numbers), "kernel_step_ms": k.step_ms,
        "kernel_steps_held": list(k.held), "kernel_steps_stalled": list(k.stalled),
        "collectives_ms": k.collectives_ms, "collectives_exposed_ms": k.exposed_ms,
        "collective_calls": k.collective_calls, "step_collectives": k.step_collectives,
        "rest": k.rest,
        "kernels_off": not probe.profile_kernels,
    }  # fmt: skip


def _initial_seed() -> int | None:
    """torch's initial seed: the job's own where it seeded torch, else one drawn at start."""
    torch = sys.modules.get("torch")
    try:
        return int(torch.initial_seed()) if torch is not None else None
    except Exception:  # noqa: BLE001
        return None


def _entry_call(call: list[Any]) -> list[Any]:
    """A tallied call in its file's words: [step, the entry's id, its tensors' shapes
    (`8x16, 8`), a graph ran, a graph was made, ms, the first tensor's elements]."""
    step, key, shapes, ran, made, took = call
    numel = 1
    for n in shapes[0] if shapes else ():
        numel *= int(n)
    words = ", ".join("x".join(map(str, s)) or "scalar" for s in shapes)
    return [step, key, words, ran, made, round(took, 4), numel if shapes else 0]
