"""A model defined in a library and called by the user (`model(**batch)`, as a Trainer
job's collator pads each batch to its longest sequence) recompiles on the user's own
inputs (#36): the advice is about those inputs - the dim that changed, mark_dynamic - and
not the library's own internal calls (before: "give generate() a static KV cache"). The
advice is applied and torch's own count shows the recompile gone."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli

# the whole suite's (`pytest --full`): end-to-end runs, minutes on 2 cores (docs/tests.md)
pytestmark = pytest.mark.full

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


CLASSIFIER_JOB = """\
import os
import sys

sys.path.insert(0, {jobs!r})
import torch
from torch_counts import backend, facts_path, write_facts
from transformers import BertConfig, BertForSequenceClassification

torch.manual_seed(0)
config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1,
                    num_attention_heads=2, intermediate_size=64, num_labels=3)
model = BertForSequenceClassification(config)
if os.environ.get("FIX"):
    exec(os.environ["FIX"])
step = torch.compile(model, backend=backend)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    batch = {{"input_ids": torch.randint(0, 100, (2, 16)),
              "attention_mask": torch.ones(2, 16, dtype=torch.long),
              "labels": torch.randint(0, 3, (2,))}}
    step(**batch).loss.backward()
    opt.step()
    opt.zero_grad()
write_facts(facts_path())
"""


def _run_job(job: Path, fix: str = "") -> tuple[dict, dict]:
    """`compilediag run` on the job (`fix`: code it runs before compiling), and torch's own
    counts from inside it."""
    facts = job.parent / "facts.json"
    proc = run_cli("run", "--format", "json", "--", sys.executable, str(job),
                   env={"JOB_FACTS": str(facts), "FIX": fix}, cwd=job.parent)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), json.loads(facts.read_text())


def test_a_config_field_the_library_sets_on_its_first_call_is_named_with_its_fix(
    tmp_path: Path,
) -> None:
    """BERT's classifier sets `config.problem_type` inside forward on its first call: the
    second call recompiles. The advice names the library line that sets it and the value
    to set beforehand (from the recompiled graph's own guard); applied, torch's count has
    no recompile. Before: "See the guard above"."""
    pytest.importorskip("transformers")
    import re

    job = tmp_path / "train.py"
    job.write_text(CLASSIFIER_JOB.format(jobs=str(ROOT / "tests" / "fixtures" / "run_jobs")))

    def run(fix: str = "") -> tuple[dict, dict]:
        return _run_job(job, fix)

    report, torch_saw = run()
    (r,) = report["recompiles"]
    assert torch_saw["recompiles_log"] == 1
    assert "sets `self.config.problem_type` itself (modeling_bert.py:" in r["suggestion"]
    assert "leave" not in r["suggestion"] and "uncompiled" not in r["suggestion"]
    fix = re.search(r"\(`(model\.config\.problem_type = .+?)`\)", r["suggestion"])
    assert fix, r["suggestion"]
    # the advice, applied: the field set before the first call
    report, torch_saw = run(fix[1])
    assert torch_saw["recompiles_log"] == 0 and torch_saw["frames"] == 1
    assert report["recompiles"] == []


PADDED_CLASSIFIER_JOB = (
    CLASSIFIER_JOB.replace(
        "for _ in range(3):", "for n in (16, 17, 18):  # each batch padded to its longest"
    )
    .replace("(2, 16)", "(2, n)")
    .replace("ones(2, 16,", "ones(2, n,")
)


def test_a_second_cause_behind_the_first_failed_guard_is_named(tmp_path: Path) -> None:
    """The Trainer case: batches padded to their own length AND the classifier setting
    `config.problem_type` on its first call. torch names only the first failed guard (the
    sequence length); the report also names the config field, with its fix, from the two
    graphs' guard trees. Both fixes applied (mark_dynamic, the field set beforehand), torch
    counts no recompile; the shape fix alone leaves one."""
    pytest.importorskip("transformers")
    import re

    job = tmp_path / "train.py"
    job.write_text(PADDED_CLASSIFIER_JOB.format(jobs=str(ROOT / "tests" / "fixtures" / "run_jobs")))

    def run(fix: str = "") -> tuple[dict, dict]:
        return _run_job(job, fix)

    report, torch_saw = run()
    assert len(report["recompiles"]) == torch_saw["recompiles_log"] == 1
    (r,) = report["recompiles"]
    assert r["failed_guard"] == "input_ids dim 1 changed 16 → 17"
    (config,) = [a for a in r["also_changed"] if "problem_type" in a]
    assert "(None → 'single_label_classification')" in config
    field = re.search(r"\(`(model\.config\.problem_type = .+?)`\)", config)
    assert field, config
    # the shape fix alone (what torch's own message points at): the recompile stays
    marked = job.read_text().replace(
        "    step(**batch)",
        "    for k in ('input_ids', 'attention_mask'):\n"
        "        torch._dynamo.mark_dynamic(batch[k], 1)\n"
        "    step(**batch)",
    )
    job.write_text(marked)
    _, torch_saw = run()
    assert torch_saw["recompiles_log"] == 1
    # both fixes: none
    report, torch_saw = run(field[1])
    assert torch_saw["recompiles_log"] == 0 and report["recompiles"] == []


FRAMEWORK = '''\
class Loop:
    """A framework's loop object: its own private state, read in its own code."""

    def __init__(self):
        self._hooks = _Hooks()

    def scale(self, h):
        if self._hooks._current_fx == "training_step":
            return h * 2
        return h * 3


class _Hooks:
    def __init__(self):
        self._current_fx = "training_step"
'''

FRAMEWORK_MODEL = """\
import torch
from torch import nn

from minitrainer import Loop


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.loop = Loop()

    def forward(self, x):
        return self.loop.scale(self.lin(x))


model = Net()


def get_model():
    return model


def get_input_sets():
    for n, fx in ((2, "training_step"), (4, "validation_step"), (6, "training_step")):
        model.loop._hooks._current_fx = fx  # the framework's own switch between its loops
        yield (torch.randn(n, 8),)
"""


def test_a_frameworks_private_state_is_never_a_fix_to_cover(tmp_path: Path) -> None:
    """#76 (6): a framework (installed: in site-packages) reads its own private attribute
    (`_hooks._current_fx`, as Lightning's `_logger_connector._current_fx`) inside the
    compiled call, and flips it between its loops while the batch size changes too. torch
    names the batch size; the framework's attribute changed as well, and its guard is read
    in the framework's own file. Before: "also changed `self.loop._hooks._current_fx` ... A
    fix has to cover each of them"; now the user's fix is the batch's alone. The guard on it
    is torch's own (its guard tree places the read in the framework's file)."""
    site = tmp_path / "site-packages" / "minitrainer"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text(FRAMEWORK)
    (tmp_path / "model.py").write_text(FRAMEWORK_MODEL)
    proc = run_cli(
        "recompiles", "model.py", "--backend", "eager", "--no-dynamic", "--no-numerics",
        "--format", "json", cwd=tmp_path, env={"PYTHONPATH": str(site.parent)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    first = report["recompiles"][0]
    assert first["failed_guard"] == "x dim 0 changed 2 → 4"
    assert all(r["also_changed"] == [] for r in report["recompiles"])
    # torch's own guard tree: it guards the framework's attribute, read in the framework's file
    trace = tmp_path / "trace"
    program = (
        "import torch, model\n"
        "m = torch.compile(model.get_model(), backend='eager', dynamic=False)\n"
        "for args in model.get_input_sets(): m(*args)\n"
    )
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", program], cwd=tmp_path, capture_output=True, text=True,
        timeout=300, env={**os.environ, "PYTHONPATH": str(site.parent),
                          "TORCH_TRACE": str(trace)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    guards = "".join(f.read_text() for f in trace.iterdir())
    assert re.search(r"EQUALS_MATCH: L\['self'\]\.loop\._hooks\._current_fx == .*"
                     r"site-packages/minitrainer/__init__\.py:8", guards)  # fmt: skip
    assert "cover each of them" not in json.dumps(report["recompiles"])
