"""A model defined in a library and called by the user (`model(**batch)`, as a Trainer
job's collator pads each batch to its longest sequence) recompiles on the user's own
inputs (#36): the advice is about those inputs - the dim that changed, mark_dynamic - and
not the library's own internal calls (before: "give generate() a static KV cache"). The
advice is applied and torch's own count shows the recompile gone."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli

JOB = """\
import os
import sys

sys.path.insert(0, {jobs!r})
import torch
from torch_counts import backend, facts_path, write_facts
from transformers import BertConfig, BertModel

torch.manual_seed(0)
config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1,
                    num_attention_heads=2, intermediate_size=64)
model = torch.compile(BertModel(config).eval(), backend=backend)
with torch.no_grad():
    for n in (37, 35):  # each batch padded to its own longest sequence
        batch = {{"input_ids": torch.randint(0, 100, (2, n)),
                  "attention_mask": torch.ones(2, n, dtype=torch.long)}}
        if os.environ.get("MARK"):
            for t in batch.values():
                torch._dynamo.mark_dynamic(t, 1)
        model(**batch)
write_facts(facts_path())
"""


def test_a_library_model_called_by_the_user_gets_advice_on_the_users_inputs(
    tmp_path: Path,
) -> None:
    pytest.importorskip("transformers")
    job = tmp_path / "train.py"
    job.write_text(JOB.format(jobs=str(ROOT / "tests" / "fixtures" / "run_jobs")))
    facts = tmp_path / "facts.json"
    proc = run_cli("run", "--format", "json", "--", sys.executable, str(job),
                   env={"JOB_FACTS": str(facts)}, cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    torch_saw = json.loads(facts.read_text())
    (r,) = report["recompiles"]
    assert torch_saw["recompiles_log"] == 1
    assert r["failed_guard"] == "input_ids dim 1 changed 37 → 35"
    assert "mark_dynamic(input_ids, 1)" in r["suggestion"], r["suggestion"]
    assert "generate()" not in r["suggestion"] and "called from inside" not in r["suggestion"]
    # the advice, applied: each input's sequence dim marked dynamic before the call
    proc = run_cli("run", "--format", "json", "--", sys.executable, str(job),
                   env={"JOB_FACTS": str(facts), "MARK": "1"}, cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(facts.read_text())["recompiles_log"] == 0
    assert json.loads(proc.stdout)["recompiles"] == []
