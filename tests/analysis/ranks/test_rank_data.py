"""Ranks that only saw different data are not divergent (#36): the same guard failing
with each rank's own values is one note with each rank's values; `--fail-on-divergence`
exits 0 on such a job (and 1 on one whose ranks compile different frames, in
tests/cli/test_run.py). Checked against torch's own counts in each rank
(tests/fixtures/run_jobs/ranks_own_data.py)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import ROOT, run_cli, run_torchrun

JOBS = ROOT / "tests" / "fixtures" / "run_jobs"


def torchrun(tmp_path: Path, job: str) -> tuple[dict, int, Path]:
    facts = tmp_path / "facts"
    proc = run_torchrun(JOBS / job, facts, "--fail-on-divergence")
    assert proc.stdout.strip(), proc.stderr
    return json.loads(proc.stdout), proc.returncode, facts


def test_ranks_that_saw_other_data_do_not_diverge(tmp_path: Path) -> None:
    report, code, facts = torchrun(tmp_path, "ranks_own_data.py")
    ranks = {r["rank"]: r for r in report["ranks"]}
    for n in (0, 1):  # each rank recompiled once, as torch counted in it
        torch_saw = json.loads((facts / f"rank{n}.json").read_text())
        assert ranks[n]["summary"]["recompiles"] == torch_saw["recompiles"] == 1
    # before: "ranks diverge", "only rank 0 recompiles for ...", and exit 1
    assert report["divergence"] == [] and code == 0
    (note,) = [n for n in report["notes"] if n["kind"] == "rank_values"]
    assert "37" in note["message"] and "40" in note["message"]
    assert "rank 0" in note["message"] and "rank 1" in note["message"]
    table = run_cli("render", str(_saved(tmp_path, report))).stdout
    assert "ranks diverge" not in table
    # one cause, one block (#68), each rank's values with its rank (before: rank 1's values
    # under rank 0)
    listing = table[table.index("Recompiles") : table.index("Graphs")]
    blocks = [b for b in listing.split("\n  0/1") if "failed" in b]
    assert len(blocks) == 1, listing
    said = " ".join(blocks[0].split())
    assert "37 → 35 on rank 0" in said and "40 → 36 on rank 1" in said, listing


def _saved(tmp_path: Path, report: dict) -> Path:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    return path
