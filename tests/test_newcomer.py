"""A newcomer's third look (#62): what misled a user who tried compilediag on files of
their own, each checked on a program in the style of theirs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.conftest import ROOT, TRACES, run_cli

JOBS = ROOT / "tests" / "fixtures" / "run_jobs"


def test_a_group_of_recompiles_shows_each_distinct_fix(tmp_path: Path) -> None:
    """A sequence length that grows (dim 1: mark it dynamic) and a partial last batch (dim
    0: drop_last=True) recompile one frame, one run of the same kind of guard. Before: only
    the first one's fix was printed; the one that matters for the partial batch was in the
    JSON alone. Torch's own counts: two recompiles."""
    facts = tmp_path / "facts.json"
    env = {"JOB_FACTS": str(facts), "PYTHONPATH": str(JOBS), "COLUMNS": "200"}
    proc = run_cli("run", "--", sys.executable, str(JOBS / "seq_batches.py"), env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(facts.read_text())["recompiles"] == 2
    table = proc.stdout
    block = table.split("Recompiles (2)", 1)[1].split("\nGraphs", 1)[0]
    assert "then ids dim 0 changed 32 → 8" in block, block
    assert "mark_dynamic(ids, 1)" in block and "drop_last=True" in block, block
    fixes = [line.split()[1] for line in block.splitlines() if line.strip().startswith("fix ")]
    assert sorted(fixes) == ["0/1", "0/2"], block


def test_negative_budgets_are_refused_before_the_run(tmp_path: Path) -> None:
    for option in ("--max-graph-breaks", "--max-recompiles", "--max-compile-time"):
        proc = run_cli("explain", "sample_models/graph_breaks.py", option, "-1")
        assert proc.returncode == 2, (option, proc.stdout, proc.stderr)
        assert option in proc.stderr and "greater than or equal to 0" in proc.stderr
    (tmp_path / "pyproject.toml").write_text("[tool.compilediag]\nmax_recompiles = -2\n")
    proc = run_cli("explain", str(ROOT / "sample_models" / "graph_breaks.py"), cwd=tmp_path)
    assert proc.returncode == 2 and "max_recompiles = -2" in proc.stderr, proc.stderr
    assert "0 or more" in proc.stderr


def test_a_kernels_note_says_the_others_only_where_there_are_others() -> None:
    """torch 2.6's Inductor trace of one kernel with no provenance: before, "The generated
    kernels name no user line (the others' were matched by the ops they hold)"."""
    log = TRACES / "torch-2.6.0-cpu" / "inductor_cache.cold.log"
    report = json.loads(run_cli("report", str(log), "--format", "json").stdout)
    (note,) = [n["message"] for n in report["notes"] if n["kind"] == "no_provenance"]
    assert note.startswith("The generated kernel names no user line: "), note
    assert "others" not in note
    assert len([k for k in report["kernels"] if k["kind"] != "extern"]) == 1


def test_the_readme_says_to_use_the_venvs_python() -> None:
    readme = (ROOT / "README.md").read_text()
    setup = readme.split("## Set-up: two commands", 1)[1].split("\n## ", 1)[0]
    assert ". .venv/bin/activate" in setup and ".venv/bin/python train.py" in setup
