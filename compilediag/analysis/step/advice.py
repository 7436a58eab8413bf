"""What the parts of a `compilediag run` step say to change: an optimizer step or a data
loader that takes a large share of the step, the batch's copy to the device, eager ops
outside the graphs (where the job's clock holds the profiler's reading of them); and the
rest's ops in words."""

from __future__ import annotations

from compilediag.harness.worker_types import ProcessRuntime
from compilediag.report.model import Breakdown, LoopLine, RestPart, Runtime, Tried
from compilediag.report.vocabulary import RestKind
from compilediag.report.words import ms, steps_words

# a part of the step this large is worth a line of advice
OPTIMIZER_SHARE = 0.2
DATA_SHARE = 0.1
# a data part under this (ms a step) is no work for worker processes: a ready batch from a
# worker costs about as much to receive (0.63 ms a batch of 64x64 floats on 2 cores, the
# main process's own 0.20), and a look's job, its data 0.28 ms a step, ran 1.7x slower
# with 2 workers
WORKERS_MIN_MS = 1.0
TOO_LITTLE = (
    "too little for worker processes to save: handing a batch over from one costs about as "
    "much (0.6 ms a batch, measured on 2 cores)"
)
FUSED = ("Adam", "AdamW", "SGD", "Adagrad")  # torch's optimizers with fused=True (CUDA and CPU)


def step_advice(job: Runtime, b: Breakdown, cuda: bool) -> list[str]:
    """What the window's parts say to change, each with its evidence: an optimizer step or
    a data loader that takes a large share of the step; the larger part's first (what it
    can save a step is at most its own time, which each says)."""
    out: list[tuple[float, str]] = []
    step = b.call_ms
    if step and b.optimizer_ms / step >= OPTIMIZER_SHARE and not job.optimizer_options.get("fused"):
        name = job.optimizer or "the optimizer"
        how = (
            "a loop over every parameter, foreach=False"
            if job.optimizer_options.get("foreach") is False
            else "foreach=True"
            if job.optimizer_options.get("foreach")
            else "torch's default implementation"
        )
        compiled = job.optimizer_options.get("compiled")
        if compiled:
            how += ", its step compiled"
        fused = (
            f"construct it with fused=True (one kernel for all the parameters; {name} has it "
            "on CUDA and CPU)" + ("" if compiled else ", or compile its step")
            if name in FUSED
            else "use foreach=True" + ("" if compiled else " or compile its step")
        )
        said = (
            f"the optimizer step takes {b.optimizer_ms / step:.0%} of a step ({ms(b.optimizer_ms)}"
            f" of {ms(step)}; {name}, {how})"
        )
        tried = tried_for(job, "optimizer")
        tryable = bool(optimizer_remedies(job, cuda))
        out.append((b.optimizer_ms, as_measured(said, f"{fused}.", tried, tryable)))
    if step and b.data_ms / step >= DATA_SHARE:
        workers = job.loaders.get("workers", 0)
        said = (
            f"the data loader's next batch takes {b.data_ms / step:.0%} of a step ({ms(b.data_ms)})"
        )
        if not workers and data_ms(job, b) < WORKERS_MIN_MS:
            fix = TOO_LITTLE
        elif not workers:
            fix = (
                "load in worker processes: DataLoader(..., num_workers=N)"
                + (", pin_memory=True" if cuda and not job.loaders.get("pin_memory") else "")
                + ", so batches are made while the step runs"
            )
        else:
            fix = (
                f"its {plural_workers(workers)} do not keep up: more workers, prefetch_factor, "
                "or persistent_workers=True"
            )
        said += ", waited for in the main process"
        tried = tried_for(job, "data")
        out.append((b.data_ms, as_measured(said, f"{fix}.", tried, data_remedy(job, b))))
    ordered = [text for _, text in sorted(out, key=lambda x: -x[0])]
    past_limit = sorted(set(job.limit_eager_steps) & set(job.kernel_step_numbers))
    return (
        ordered + loop_advice(job, b, cuda)
        + rest_advice(b, explained=_loop_work_ms(job, b), past_limit=past_limit)
    )  # fmt: skip


MIN_SHARE = 0.1  # --try-fixes runs a remedy for a part this share of the median step


def median_share(job: Runtime, part: str) -> float:
    step = job.step_medians.get("step") or 0.0
    return (job.step_medians.get(part) or 0.0) / step if step else 0.0


def optimizer_remedies(job: Runtime, cuda: bool) -> list[str]:
    """The optimizer's remedies --try-fixes runs for this job (remedies.candidates): fused
    where the optimizer has it, foreach where it loops over the parameters; none where the
    window's median step gives it under MIN_SHARE (its mean, raised by slow steps, may not:
    a look read "Untried: --try-fixes runs the job with it" beside a run that had not)."""
    opts = job.optimizer_options
    if median_share(job, "optimizer") < MIN_SHARE or opts.get("fused") or opts.get("compiled"):
        return []
    loops = opts.get("foreach") is False or (opts.get("foreach") is None and not cuda)
    return [r for r, ok in (("fused", job.optimizer in FUSED), ("foreach", loops)) if ok]


def data_ms(job: Runtime, b: Breakdown | None = None) -> float:
    """The window's median data part (the breakdown's mean where no median was kept)."""
    return job.step_medians.get("data") or (b.data_ms if b is not None else 0.0)


def data_remedy(job: Runtime, b: Breakdown | None = None) -> bool:
    """--try-fixes runs the job with DataLoader workers (remedies.candidates): where the data
    part is a share of the median step and WORKERS_MIN_MS or more."""
    return (
        median_share(job, "data") >= MIN_SHARE
        and data_ms(job, b) >= WORKERS_MIN_MS
        and not job.loaders.get("workers")
    )


def tried_for(job: Runtime, part: str) -> Tried | None:
    """The remedy `--try-fixes` measured for this part of the step (a kept one first);
    None where none was."""
    found = [t for t in job.tried if t.part == part and len(t.remedies) <= 1 and t.ratio]
    return next((t for t in found if t.kept), found[0] if found else None)


UNTRIED = "Untried: --try-fixes runs the job with it and keeps it only where the step is faster."


def as_measured(said: str, fix: str, t: Tried | None, tryable: bool = False) -> str:
    """A part's advice, past what this run measured: the fix where nothing was tried (and
    where --try-fixes has it as a remedy, that it is untried: on 2 cores a TensorDataset's
    batches came 5x slower from workers); kept, the fix with its measured effect; not kept,
    the measurement in the fix's place."""
    if t is None:
        return f"{said}: {fix}" + (f" {UNTRIED}" if tryable else "")
    if t.kept:
        return f"{said}: {fix} Tried (--try-fixes): {t.why}."
    return f"{said}. Tried (--try-fixes), `{t.code}`: {t.why}."


LOOP_SHARE = 0.1  # a function the loop calls this share of the window's step: advised


def loop_work_lines(job: Runtime, b: Breakdown) -> list[LoopLine]:
    """The loop's lines that do its own work (a function of the user's or a library's it
    calls; not torch's: the model's call, backward, the optimizer's step, a batch from a
    DataLoader) and take LOOP_SHARE of the window's step beyond the rank's wait for another
    rank: host work at the user's line, by the job's own clock there. (A rank that waits
    shows its wait at a line: on CUDA where a batch's copy to the device waits for the
    all-reduce; that line is not its own work.)"""
    step = loop_step(job, b)
    waited = step * min(1.0, b.exposed_wait_ms / b.call_ms) if b.call_ms else 0.0
    return [
        x for x in job.loop if x.own_work and x.calls and x.ms - waited >= LOOP_SHARE * step
    ]  # fmt: skip


def loop_step(job: Runtime, b: Breakdown) -> float:
    """The step the loop's lines were timed in, by their clock (the window's, where the
    lines were timed there)."""
    return job.loop_step_ms or b.call_ms


def _loop_work_ms(job: Runtime, b: Breakdown) -> float:
    return sum(x.ms for x in loop_work_lines(job, b))


def loop_advice(job: Runtime, b: Breakdown, cuda: bool) -> list[str]:
    """Host work at the loop's own line: its function, where, its share of the step; the
    advice for work that prepares data (most of what a loop calls beside the model): a list
    of ints to index with where its function indexes item by item, workers; pinned memory
    where a device copies the batch."""
    out = []
    step = loop_step(job, b)
    for x in loop_work_lines(job, b):
        index = (
            "index with a list of ints (ix.tolist()) rather than one 0-d tensor at a time, or "
            if x.item_by_item
            else ""
        )
        said = (
            f"{x.named} takes {x.ms / step:.0%} of a step ({ms(x.ms)} of the {ms(step)} the "
            "loop's lines took, by the job's clock at each line): work the loop does itself, "
            "outside the model"
        )
        if x.ms < WORKERS_MIN_MS:  # (a look's 0.2 ms get_batch ran 6x slower from a worker)
            out.append(f"{said}: {index}{TOO_LITTLE}.".replace(", or too", "; too"))
            continue
        out.append(
            f"{said}. Where it prepares a batch: {index}make it a Dataset's __getitem__ "
            "served by a DataLoader with workers (num_workers=N"
            + (", pin_memory=True" if cuda else "")
            + "), so batches are made while the step runs."
        )
    return out


# what the profiler's names for a step's eager ops are, in words
SYNCS = ("aten::_local_scalar_dense", "aten::item", "aten::is_nonzero", "cudaStreamSynchronize",
         "cudaDeviceSynchronize", "cudaEventSynchronize")  # fmt: skip
COPIES = ("aten::to", "aten::_to_copy", "aten::copy_", "aten::contiguous", "aten::clone")
REST_SHARE = 0.1  # eager ops outside the graphs this share of a step: advised


def rest_parts(p: ProcessRuntime) -> list[RestPart]:
    """The eager ops the kernel profile saw a step run outside any compiled graph, per
    step, in words: reads of a tensor's value (a wait for the device on CUDA), copies, the
    rest (the loss, a metric)."""
    if not p.kernel_steps:
        return []
    steps = p.kernel_steps
    return [
        RestPart(
            row.name,
            *_rest_kind(row.name, row.kind),
            round(row.calls / steps, 3),
            round(row.ms / steps, 6),
        )
        for row in p.rest
    ]


def _rest_kind(name: str, probed: str = RestKind.EAGER) -> tuple[RestKind, str]:
    """An op of the rest's kind (sync, to_device, copy, eager), and what it is in words;
    `probed`: the probe's kind (to_device: the op copied host memory to the device)."""
    if probed == RestKind.TO_DEVICE:
        return RestKind.TO_DEVICE, (
            "the data's copy to the device (.to(device) of a batch): the loader's work, "
            "not an op to compile"
        )
    if probed == RestKind.HOST_READ:
        return RestKind.HOST_READ, (
            "a host tensor's value read in Python (a CPU tensor's .item(), int(), indexing "
            "with a 0-d tensor): no wait for the device; Python's own cost, where the loop "
            "reads values one at a time"
        )
    if name.startswith(SYNCS):
        if name.startswith("aten::"):
            return RestKind.SYNC, (
                "a tensor's value read in Python (.item(), float(), int(), bool(), .tolist()): "
                "on CUDA, a wait for the device"
            )
        return RestKind.SYNC, "a wait for the device (torch.cuda.synchronize)"
    if name.startswith(COPIES):
        return RestKind.COPY, "a copy or cast outside the graphs (.to(), .float(), .contiguous())"
    return RestKind.EAGER, "an eager op outside the compiled graphs (the loss, a metric)"


def rest_advice(
    b: Breakdown, explained: float = 0.0, past_limit: list[int] | None = None
) -> list[str]:
    """Eager ops outside the graphs that take REST_SHARE of a step. (Not the reads of a
    value: on CUDA such a read's time is a wait for work the device does anyway, and what
    it costs is the device idle after it, which the profile does not measure.) The job's
    clock is the reference: where the profiler read more for them than the window's clock
    gives the whole rest, the profiler made that time (it inflates what follows a compiled
    region on CPU), and nothing is advised. The data's copies to the device get the data
    advice. `explained`: the time a step spends in functions the loop calls itself
    (loop_advice): where that holds the eager ops' time, they are those functions' own, and
    are not advised into the compiled forward. `past_limit`: the profiled steps whose call
    of the compiled entry ran in eager mode past the recompile limit: their ops are among
    these, and the limit is what to fix, not the forward."""
    step = b.call_ms
    copies = [r for r in b.rest if r.kind == RestKind.TO_DEVICE]
    eager = [r for r in b.rest if r.kind in (RestKind.COPY, RestKind.EAGER)]
    out: list[str] = []
    moved, spent = sum(r.ms for r in copies), sum(r.ms for r in eager)
    held = b.rest_holds(moved + spent)
    # a copy that reads the device's queue holds the rank's wait for another rank there
    waited = b.exposed_wait_ms
    if step and (moved - waited) / step >= REST_SHARE:
        # a copy from pageable memory makes the host wait for the device's queued work: its
        # host time is real even where the clock's rest can't hold it, and the fix the same
        said = f"{moved / step:.0%} of a step" if held else "host time that waits for the device"
        out.append(
            f"copying the batch to the device takes {said} ({ms(moved)} a step under the "
            f"profiler: {', '.join(r.name for r in copies[:3])}): DataLoader(..., "
            "pin_memory=True) and .to(device, non_blocking=True), so the copy runs beside the "
            "step"
        )
    if not held:  # the profiler's reading, not the step's: as rest_named says
        return out
    if not step or spent / step < REST_SHARE or explained >= spent:
        return out
    top = ", ".join(f"{r.name} {ms(r.ms)}" for r in eager[:3])
    if past_limit:
        return out + [
            f"eager ops outside the compiled graphs take {spent / step:.0%} of a step "
            f"({ms(spent)}: {top}): in {steps_words(past_limit)} of the kernel profile the "
            "compiled forward itself ran in eager mode, past the recompile limit, and its ops "
            "are among them: the limit's fix (under Recompile limit hit) gives those calls "
            "their graph."
        ]
    said = f"eager ops outside the compiled graphs take {spent / step:.0%} of a step ({ms(spent)}: {top})"
    clipping = sum(r.ms for r in eager if r.name in CLIPPING)
    if any(r.name == "aten::_foreach_norm" for r in eager) and clipping >= spent / 2:
        # (a look's Trainer step: its clipping read "compute them in the compiled forward")
        return out + [
            f"{said}: {clipping / spent:.0%} of them gradient clipping's (clip_grad_norm_'s "
            "norms and scaling, between backward and the optimizer: not the forward's to "
            "compute); where your loop clips, torch.compile the function that clips the "
            "gradients and steps the optimizer."
        ]
    return out + [
        f"{said}: compute them in the compiled forward (return the loss or metric from it), "
        "or torch.compile the function that computes them."
    ]


# torch.nn.utils.clip_grad_norm_'s ops (foreach: the norms, their stack, the non-finite
# check, the scaling)
CLIPPING = frozenset({
    "aten::_foreach_norm", "aten::stack", "aten::linalg_vector_norm", "aten::isinf",
    "aten::isnan", "aten::logical_or", "aten::clamp", "aten::reciprocal",
    "aten::_foreach_mul_", "aten::_foreach_mul", "aten::unbind",
})  # fmt: skip


def plural_workers(n: int) -> str:
    return f"{n} worker" + ("s" if n != 1 else "")
