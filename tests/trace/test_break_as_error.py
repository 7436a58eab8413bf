"""A graph break under fullgraph=True raises to the job's call: torch records a failed
compile (fail_type Unsupported) and, unlike a frame it skips and runs in eager mode, no
graph-break record of it. The report says a failed compile at the break's line, with the
break's own fix, and the gate fails on it; the fix applied, the job runs and the report
has no failure. A frame torch skipped (a break in a loop, no fullgraph) stays a skipped frame
that runs in eager mode."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import run_cli, run_json

JOB = """\
import torch


@torch.compile(fullgraph={fullgraph}, backend="eager")
def scale(x):
{body}
    return x * 2


print(scale(torch.randn(4)).shape)
"""
PRINT = '    print("scaling", x)\n'
IN_LOOP = '    for i in range(2):\n        print("scaling", i)\n        x = x + 1\n'


def traced(tmp_path: Path, name: str, source: str) -> tuple[Path, subprocess.CompletedProcess]:
    """The job run by itself with TORCH_TRACE, as a user's job writes its trace."""
    job, trace = tmp_path / f"{name}.py", tmp_path / f"trace_{name}"
    job.write_text(source)
    proc = subprocess.run(
        [sys.executable, str(job)], capture_output=True, text=True, timeout=300,
        env={"TORCH_TRACE": str(trace), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    return trace, proc


def test_a_break_that_raised_under_fullgraph_is_a_failed_compile(tmp_path: Path) -> None:
    trace, job = traced(tmp_path, "strict", JOB.format(fullgraph=True, body=PRINT))
    assert job.returncode != 0 and "torch._dynamo.exc.Unsupported" in job.stderr  # torch's
    report, proc = run_json("report", str(trace), "--fullgraph")
    assert proc.returncode == 4, proc.stderr
    (failure,) = report["compile_failures"]
    assert failure["line"] == 6 and "graph break made an error" in failure["reason"]
    assert "GB0059" in failure["reason"]
    words = " ".join(f["message"] for f in report["notes"])
    assert "runs in eager mode" not in words and "ran in eager mode" not in words
    # the break is the fullgraph rule's too: the job broke its graph (a look read "ok
    # fullgraph: 0 graph-break sites" beside the failure)
    failed = {r["name"]: r for r in report["verdict"]["rules"] if not r["passed"]}
    assert set(failed) == {"fullgraph", "compile-failures"}, failed
    assert failed["fullgraph"]["value"] == 1
    text = run_cli("report", str(trace), "--fullgraph").stdout
    assert "fullgraph: 0 graph-break sites and 1 that raised under fullgraph=True" in text, text

    # the break's own fix, applied to the job: it runs, and compiles whole
    (code,) = re.findall(
        r"`(torch\._dynamo\.config\.reorderable_logging_functions\.add\(print\))`", failure["fix"]
    )
    fixed = JOB.format(fullgraph=True, body=PRINT).replace(
        "import torch\n", f"import torch\n{code}\n", 1
    )
    trace, job = traced(tmp_path, "fixed", fixed)
    assert job.returncode == 0, job.stderr
    report, proc = run_json("report", str(trace), "--fullgraph")
    assert proc.returncode == 0, proc.stderr
    assert not report["compile_failures"] and len(report["graphs"]) == 1


def test_a_frame_torch_skipped_without_fullgraph_is_no_failure(tmp_path: Path) -> None:
    trace, job = traced(tmp_path, "loop", JOB.format(fullgraph=False, body=IN_LOOP))
    assert job.returncode == 0, job.stderr
    report, proc = run_json("report", str(trace))
    assert proc.returncode == 0, proc.stderr
    assert not report["compile_failures"]
    words = " ".join(f["message"] for f in report["notes"])
    assert "was not compiled and runs in eager mode" in words


BRANCH_JOB = """\
import torch

torch._dynamo.config.capture_scalar_outputs = True


@torch.compile(fullgraph={fullgraph}, backend="eager")
def gate(x):
    n = x.sum().item()
{branch}


print(gate(torch.arange(8.0)))
"""
IF = "    if n > 0:\n        return x * 2\n    return x - 1"
WHERE = "    return torch.where(x.sum() > 0, x * 2, x - 1)"


def test_a_branch_on_a_run_time_value_under_fullgraph_gets_the_branchs_fix(
    tmp_path: Path,
) -> None:
    """With capture_scalar_outputs, `.item()` is traced and the `if` on it raises a UserError
    under fullgraph=True (a look: the right line, no fix). Its fix is the data-dependent
    branch's, which torch's own break without fullgraph names; applied, the job compiles
    whole and the gate passes."""
    trace, job = traced(tmp_path, "branch", BRANCH_JOB.format(fullgraph=True, branch=IF))
    assert job.returncode != 0 and "data-dependent" in job.stderr
    report, proc = run_json("report", str(trace))
    assert proc.returncode == 4, proc.stderr
    (failure,) = report["compile_failures"]
    assert failure["line"] == 9 and failure["fail_type"] == "UserError", failure
    assert "torch.where(cond, a, b)" in failure["fix"] and "GB0170" in failure["fix"]
    # torch's own answer without fullgraph: a break at that line, of that kind
    trace, job = traced(tmp_path, "broken", BRANCH_JOB.format(fullgraph=False, branch=IF))
    assert job.returncode == 0, job.stderr
    report, _ = run_json("report", str(trace))
    assert [(b["line"], b["gb_id"]) for b in report["graph_breaks"]] == [(9, "GB0170")]
    # the fix applied: compiled whole, the same outputs as the branch in eager mode
    trace, job = traced(tmp_path, "where", BRANCH_JOB.format(fullgraph=True, branch=WHERE))
    assert job.returncode == 0, job.stderr
    assert job.stdout.split() == [
        "tensor([",
        "0.,",
        "2.,",
        "4.,",
        "6.,",
        "8.,",
        "10.,",
        "12.,",
        "14.])",
    ]
    report, proc = run_json("report", str(trace), "--fullgraph")
    assert proc.returncode == 0 and not report["compile_failures"], proc.stderr
