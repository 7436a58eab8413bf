"""A Hugging Face Trainer job (torch_compile=True, a padding collator) under torchrun, 2
gloo ranks (#36): the Trainer, through accelerate, wraps the model in DDP and compiles
the wrapper, and calls the model with batches padded to their own longest sequence.
Checked against torch's own counts in each rank, and each piece of advice on the job:
- the recompile is the batches' padding (not generate()'s KV cache, not a mark_dynamic
  on a tensor the user never holds), and the config field BERT sets on its first call
  is named behind the first failed guard; both fixes applied, torch counts no recompile;
- breaks inside DDP's code are accelerate's choice (named, with its setting), not
  `DDP(torch.compile(model))`; the setting applied, torch counts no break."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli, run_torchrun
from tests.report.test_words import problems

# the whole suite's (`pytest --full`): end-to-end runs, minutes on 2 cores (docs/tests.md)
pytestmark = pytest.mark.full

JOB = ROOT / "tests" / "fixtures" / "run_jobs" / "trainer_padded.py"


def _run(tmp_path: Path, name: str, **env: str) -> tuple[dict, list[dict]]:
    facts = tmp_path / name
    proc = run_torchrun(JOB, facts, env={"OUT_DIR": str(tmp_path / "out"), **env}, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    torch_saw = [json.loads((facts / f"rank{n}.json").read_text()) for n in (0, 1)]
    return report, torch_saw


def test_a_trainer_job_under_torchrun_gets_advice_it_can_apply(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    report, torch_saw = _run(tmp_path, "plain")
    ranks = {r["rank"]: r["summary"] for r in report["ranks"]}
    for n in (0, 1):
        assert ranks[n]["recompiles"] == torch_saw[n]["recompiles_log"] >= 1
        assert ranks[n]["graph_breaks"] == torch_saw[n]["graph_breaks"]
    assert report["divergence"] == []  # the ranks only padded their own data
    shape = [r for r in report["recompiles"] if r["cause"] == "shape"]
    assert shape
    for r in shape:
        assert "a collator padding each batch" in r["suggestion"], r["suggestion"]
        assert "generate()" not in r["suggestion"] and "mark_dynamic" not in r["suggestion"]
        assert "uncompiled" not in r["suggestion"]
    assert any("problem_type" in a for r in shape for a in r["also_changed"])
    # one cause, one block (#68): the padding's recompiles of both ranks and both frames
    # under one failed guard, each rank's values, the fix once; the JSON keeps each record
    saved = tmp_path / "report.json"
    saved.write_text(json.dumps(report))
    table = run_cli("render", str(saved), env={"COLUMNS": "200"}).stdout
    section = table.split("\nRecompiles (", 1)[1].split("\n", 1)[1].split("\nGraphs", 1)[0]
    assert section.count("failed input_ids dim 1 changed") == 1, section
    assert "on rank 0" in section and "on rank 1" in section, section
    assert section.count("a collator padding each batch") == 1, section
    assert "as for" not in section and len(shape) >= 2
    assert not problems(" ".join(section.split()))  # nothing spliced, cut or doubled
    for b in report["graph_breaks"]:  # breaks in DDP's code: accelerate's choice
        if b["framework"] == "torch.nn.parallel (DDP)":
            assert "accelerate wrapped the model in DistributedDataParallel" in b["suggestion"]
            assert "DDP(torch.compile(model))" not in b["suggestion"]
            assert "ACCELERATE_DYNAMO_USE_REGIONAL_COMPILATION=1" in b["suggestion"]
    ddp_breaks = [b for b in report["graph_breaks"] if b["framework"] == "torch.nn.parallel (DDP)"]

    # the recompile advice, applied: dynamic sizes from the start and the field set first
    report, torch_saw = _run(
        tmp_path, "fixed", ACCELERATE_DYNAMO_USE_DYNAMIC="1", FIX_PROBLEM_TYPE="1"
    )
    assert [t["recompiles_log"] for t in torch_saw] == [0, 0]
    assert report["recompiles"] == []

    if ddp_breaks:  # the framework's setting, applied: no break left in DDP's code
        report, torch_saw = _run(
            tmp_path, "regional", ACCELERATE_DYNAMO_USE_REGIONAL_COMPILATION="1"
        )
        assert [t["graph_breaks"] for t in torch_saw] == [0, 0]
        assert not [b for b in report["graph_breaks"] if b["framework"].endswith("(DDP)")]
