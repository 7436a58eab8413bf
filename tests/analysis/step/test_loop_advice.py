"""The advice for work at the loop's own line (a tenth look, #76): "index with a list ...
rather than one 0-d tensor at a time" was given beside a make_batch that indexes nothing.
It is given where the function the line calls indexes with each item of a loop over a
tensor, as the nanoGPT-style job's get_batch does, and the measured effect of the fix it
names holds there: Python ints index a tensor faster than 0-d tensors do."""

from __future__ import annotations

import time
from pathlib import Path

import torch

from compilediag.analysis.source import indexes_item_by_item
from compilediag.analysis.step.advice import loop_advice
from compilediag.report.model import Breakdown, LoopLine, Runtime

JOBS = Path(__file__).resolve().parents[2] / "fixtures" / "run_jobs"

PROGRAM = """
import torch

def get_batch(d, ix):
    return torch.stack([d[i : i + 4] for i in ix])

def as_ints(d, ix):
    return torch.stack([d[i : i + 4] for i in ix.tolist()])

def make_rows(i):
    rows = []
    for r in range(32):
        rows.append([(i * 31 + r * 7 + c) % 97 for c in range(64)])
    return rows

def one_by_one(d, ix):
    out = []
    for j in ix:
        out.append(d[j])
    return out
"""


def test_a_function_that_indexes_item_by_item_is_told_from_one_that_does_not(
    tmp_path: Path,
) -> None:
    program = tmp_path / "data.py"
    program.write_text(PROGRAM)
    found = {n: indexes_item_by_item(str(program), n) for n in
             ("get_batch", "as_ints", "make_rows", "one_by_one", "loader.one_by_one", "absent")}  # fmt: skip
    assert found == {
        "get_batch": True, "as_ints": False, "make_rows": False, "one_by_one": True,
        "loader.one_by_one": True, "absent": False,
    }, found  # fmt: skip
    # the jobs the suite runs: gpt_ddp's get_batch indexes a tensor with each item of a
    # tensor; slow_batch_ddp's make_batch indexes nothing
    assert indexes_item_by_item(str(JOBS / "gpt_ddp.py"), "get_batch")
    assert not indexes_item_by_item(str(JOBS / "slow_batch_ddp.py"), "make_batch")


def test_the_indexing_advice_is_given_only_where_the_function_indexes_item_by_item() -> None:
    job = Runtime()
    job.loop_step_ms = 10.0
    b = Breakdown(call_ms=10.0, in_graphs_ms=2.0, between_graphs_ms=0.0, outside_ms=8.0, calls=5)
    job.loop = [LoopLine("train.py", 57, 4.0, "main", "get_batch", "x, y = get_batch()", True)]
    (said,) = loop_advice(job, b, cuda=False)
    assert "index with a list of ints (ix.tolist())" in said and "pin_memory" not in said, said
    job.loop[0].item_by_item = False
    (said,) = loop_advice(job, b, cuda=True)
    assert "index with" not in said and "num_workers=N, pin_memory=True" in said, said


def test_python_ints_index_faster_than_0d_tensors() -> None:
    """The advice's claim, on the advice's own example: `ix.tolist()` against `ix`."""
    d = torch.arange(1 << 14)
    ix = torch.randint(0, len(d) - 8, (64,))

    def best(fn) -> float:
        times = []
        for _ in range(7):
            start = time.perf_counter()
            for _ in range(20):
                fn()
            times.append(time.perf_counter() - start)
        return min(times)

    tensors = best(lambda: torch.stack([d[i : i + 8] for i in ix]))
    ints = best(lambda: torch.stack([d[i : i + 8] for i in ix.tolist()]))
    assert ints < tensors, (ints, tensors)


def test_a_line_under_a_workers_handoff_is_not_given_workers() -> None:
    """Look 26 (pytorch/examples' regression, a 0.3 ms step): "get_batch takes 21% of a
    step (0.204 ms) ... make it a Dataset's __getitem__ served by a DataLoader with
    workers"; applied, the step ran 6x slower (1.86 ms): a batch from a worker costs more to
    receive than that. Under WORKERS_MIN_MS the line is said, the workers are not."""
    from compilediag.analysis.step.advice import WORKERS_MIN_MS

    job = Runtime(loop_step_ms=0.96)
    b = Breakdown(call_ms=0.96, in_graphs_ms=0.2, between_graphs_ms=0.0, outside_ms=0.7, calls=5)
    job.loop = [LoopLine("main.py", 46, 0.204, "<module>", "get_batch",
                         "batch_x, batch_y = get_batch()", False)]  # fmt: skip
    (said,) = loop_advice(job, b, cuda=False)
    assert "num_workers" not in said and "too little for worker processes to save" in said, said
    job.loop[0].item_by_item = True
    (said,) = loop_advice(job, b, cuda=False)
    assert said.endswith(
        ": index with a list of ints (ix.tolist()) rather than one 0-d tensor at a time; too "
        "little for worker processes to save: handing a batch over from one costs about as "
        "much (0.6 ms a batch, measured on 2 cores)."
    ), said
    job.loop[0].ms = job.loop_step_ms = b.call_ms = 4 * WORKERS_MIN_MS
    (said,) = loop_advice(job, b, cuda=False)
    assert "num_workers=N" in said
