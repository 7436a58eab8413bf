"""Whose input a recompiling frame's changed value is, decided once from the whole stack
(#50): a library's model the user calls directly (their own line, or compilediag's worker
with the inputs their file made) takes tensors the user passes and can mark; a frame the
library calls itself, or that a framework's loop calls, does not. A batch that came in
smaller once is the loader's last batch in any loop (drop_last), a collator's padding only
where a sequence dim varies; a mode switch a framework's validation loop makes is nothing to
change, and no advice sends the user to `trainer.fit`. Each piece of advice is applied to
the program it was made for and torch's own counts show the recompile gone (or the report
said why not).

The frameworks here are tiny packages of our own (tests/fixtures/frameworks), copied into a
`site-packages` folder as `pip install --target` would put them; a Lightning job runs too
where Lightning is installed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli

# the whole suite's (`pytest --full`): end-to-end runs, minutes on 2 cores (docs/tests.md)
pytestmark = pytest.mark.full

JOBS = str(ROOT / "tests" / "fixtures" / "run_jobs")
PACKAGES = ROOT / "tests" / "fixtures" / "frameworks"

# torch's own counts, per frame: CompileCounter behind the eager backend (torch_counts)
FACTS = "write_facts(facts_path(), per_frame={str(k): v for k, v in per_frame.items()})\n"


def _installed(tmp_path: Path, *names: str) -> dict[str, str]:
    """The packages copied into a site-packages folder of the test's, on PYTHONPATH."""
    site = tmp_path / "site-packages"
    for name in names:
        shutil.copytree(PACKAGES / name, site / name, dirs_exist_ok=True)
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path}


def _run(job: Path, source: str, env: dict[str, str] | None = None) -> tuple[dict, dict]:
    """`compilediag run` on the job, and torch's own counts from inside it."""
    job.write_text(source)
    facts = job.parent / "facts.json"
    facts.unlink(missing_ok=True)
    proc = run_cli("run", "--format", "json", "--", sys.executable, job.name,
                   env={"JOB_FACTS": str(facts), **(env or {})}, cwd=job.parent)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout), json.loads(facts.read_text())


def _recompiles(torch_saw: dict) -> int:
    return sum(n - 1 for n in torch_saw["per_frame"].values())


def _one_recompile(job: Path, source: str, env: dict[str, str] | None = None) -> dict:
    """The job's one recompile, as the report says it, torch counting one too."""
    report, torch_saw = _run(job, source, env)
    assert len(report["recompiles"]) == _recompiles(torch_saw) == 1, report["recompiles"]
    return report["recompiles"][0]


def _no_recompile(job: Path, source: str, env: dict[str, str] | None = None) -> None:
    """The advice applied: no recompile, by torch's count and the report's."""
    report, torch_saw = _run(job, source, env)
    assert _recompiles(torch_saw) == 0 and report["recompiles"] == []


def _line(source: str, text: str) -> int:
    return 1 + next(i for i, t in enumerate(source.splitlines()) if text in t)


# --- 1. a library's model the user calls directly: the inputs they pass ------------------

MODEL_FILE = """\
import torch
from transformers import BertConfig, BertModel


def get_model():
    torch.manual_seed(0)
    config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64)
    return BertModel(config).eval()


def get_input_sets():
    sets = []
    for n in (12, 16, 20):  # three batches, each padded to its own longest sequence
        input_ids = torch.randint(0, 100, (4, n))
{mark}        sets.append({{"input_ids": input_ids}})
    return sets
"""
MARK_SETS = "        torch._dynamo.mark_dynamic(input_ids, 1)\n"

# the model file's input sets through torch.compile, counted by torch
COUNT = """
import importlib.util, json, sys, torch
sys.path.insert(0, sys.argv[2])
import torch_counts
spec = importlib.util.spec_from_file_location("model", sys.argv[1])
model = importlib.util.module_from_spec(spec); spec.loader.exec_module(model)
compiled = torch.compile(model.get_model(), backend=torch_counts.backend)
with torch.no_grad():
    for inputs in model.get_input_sets():
        compiled(**inputs)
print(json.dumps({str(k): v for k, v in torch_counts.per_frame.items()}))
"""


def test_a_library_model_the_worker_calls_with_the_users_inputs_is_told_to_mark_them(
    tmp_path: Path,
) -> None:
    """`compilediag recompiles` on a model file whose model is transformers' BertModel and
    whose input sets have three sequence lengths: the worker calls the model with the
    user's tensors, so the advice is mark_dynamic(input_ids, 1) where the file makes them,
    or padding to a few lengths. Before: "`input_ids` is a value of transformers', not one
    you pass, so it can't be marked" (the worker's caller, Python's runpy, was taken for
    the library's). Applied in the file, torch compiles the frame once."""
    pytest.importorskip("transformers")
    model = tmp_path / "bert_model.py"

    def run(mark: str) -> tuple[dict, int]:
        model.write_text(MODEL_FILE.format(mark=mark))
        proc = run_cli("recompiles", str(model), "--format", "json", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]
        counted = subprocess.run(
            [sys.executable, "-c", COUNT, str(model), JOBS],
            capture_output=True, text=True, check=True, cwd=tmp_path,
        )  # fmt: skip
        per_frame = json.loads(counted.stdout.strip().splitlines()[-1])
        return json.loads(proc.stdout), sum(n - 1 for n in per_frame.values())

    report, torch_recompiles = run("")
    assert len(report["recompiles"]) == torch_recompiles == 1
    (r,) = report["recompiles"]
    said = r["suggestion"]
    assert r["failed_guard"] == "input_ids dim 1 changed 12 → 16"
    assert "`torch._dynamo.mark_dynamic(input_ids, 1)`" in said, said
    assert "get_input_sets()" in said and "pad_to_multiple_of=8" in said, said
    assert "not one you pass" not in said and "called from inside" not in said, said
    # the advice, applied where the file makes the inputs: one compile
    report, torch_recompiles = run(MARK_SETS)
    assert torch_recompiles == 0 and report["recompiles"] == []


CLASSIFY = """\
import sys

sys.path.insert(0, {jobs!r})
import torch
from torch_counts import backend, facts_path, per_frame, write_facts
from transformers import BertConfig, BertForSequenceClassification

torch.manual_seed(0)
config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1,
                    num_attention_heads=2, intermediate_size=64, num_labels=3)
model = BertForSequenceClassification(config).eval()
compiled = torch.compile(model, backend=backend)
with torch.no_grad():
    for n in (12, 16, 20):  # batches of three lengths
        input_ids = torch.randint(0, 100, (4, n))
{mark}        logits = compiled(input_ids=input_ids).logits
{facts}"""
MARK_CALL = "        torch._dynamo.mark_dynamic(input_ids, 1)\n"


def test_a_transformers_classifier_called_by_the_users_line_is_advised_at_that_call(
    tmp_path: Path,
) -> None:
    """BertForSequenceClassification from a config, called by the user's own line with
    `input_ids=` of three lengths: the advice names that call and marks what it passes
    (before: the guard's bare "mark it dynamic before the first call", no call, no padding).
    Applied at that line, torch counts no recompile."""
    pytest.importorskip("transformers")
    job = tmp_path / "classify.py"

    def source(mark: str) -> str:
        return CLASSIFY.format(jobs=JOBS, mark=mark, facts=FACTS)

    r = _one_recompile(job, source(""))
    said = r["suggestion"]
    call = _line(source(""), "compiled(input_ids=input_ids)")
    assert f"`input_ids` is an input you pass at the call, classify.py:{call}" in said, said
    assert "`torch._dynamo.mark_dynamic(input_ids, 1)`" in said and "pad_to_multiple_of" in said
    assert "not one you pass" not in said
    _no_recompile(job, source(MARK_CALL))


TOKENS = """\
import sys

sys.path.insert(0, {jobs!r})
import torch
from minilib import TokenModel
from torch_counts import backend, facts_path, per_frame, write_facts

torch.manual_seed(0)
model = TokenModel()
compiled = torch.compile(model, backend=backend{dynamic})
with torch.no_grad():
    for n in (12, 16, 20):  # batches of three lengths
        input_ids = torch.randint(0, 100, (4, n))
{mark}        logits = compiled(input_ids)
{facts}"""


def test_the_users_input_is_marked_and_the_librarys_own_frame_is_not(tmp_path: Path) -> None:
    """A library's model (minilib, installed) called by the user's line, whose block breaks
    the graph, so Dynamo compiles the block's code as its own frame, called from inside the
    library. The model's frame: mark `input_ids` at the user's call. The block's frame: its
    tensor is the library's, "not one you pass, so it can't be marked" (the wording kept),
    dynamic=True. Each applied: the mark removes the model frame's recompile (torch's count
    per frame), not the library's frames' (as the report said); dynamic=True removes all."""
    env = _installed(tmp_path, "minilib")
    job = tmp_path / "tokens.py"

    def source(mark: str = "", dynamic: str = "") -> str:
        return TOKENS.format(jobs=JOBS, mark=mark, dynamic=dynamic, facts=FACTS)

    report, torch_saw = _run(job, source(), env)
    assert len(report["recompiles"]) == _recompiles(torch_saw) >= 2
    frame_of = {r["compile_id"]: r for r in report["recompiles"]}
    users = frame_of["0/1"]  # TokenModel.forward: the frame the user's line calls
    call = _line(source(), "compiled(input_ids)")
    assert users["failed_guard"] == "input_ids dim 1 changed 12 → 16"
    assert (
        f"`input_ids` is an input you pass at the call, tokens.py:{call}" in users["suggestion"]
    ), users["suggestion"]
    assert "`torch._dynamo.mark_dynamic(input_ids, 1)`" in users["suggestion"]
    inner = [r for r in report["recompiles"] if "called from inside minilib" in r["suggestion"]]
    assert [r["frame"] for r in inner] == ["forward, after line 15"], report["recompiles"]
    for r in inner:  # Mixer.forward's code after its break, called by TokenModel.forward
        assert "This frame is minilib's own code, called from inside minilib" in r["suggestion"]
        assert "a value of minilib's, not one you pass, so it can't be marked" in r["suggestion"]
        assert "mark_dynamic" not in r["suggestion"], r["suggestion"]
    outside = [r for r in report["recompiles"] if r not in inner]
    assert not [r for r in outside if "not one you pass" in r["suggestion"]]
    # the user's mark, applied: their frame compiles once; the frames after the breaks
    # still recompile, as the report said they would
    before = _recompiles(torch_saw)
    _, torch_saw = _run(job, source(mark=MARK_CALL), env)
    assert torch_saw["per_frame"]["0"] == 1
    assert _recompiles(torch_saw) == before - 1
    # dynamic=True, the library frames' advice: no recompile anywhere
    _, torch_saw = _run(job, source(dynamic=", dynamic=True"), env)
    assert _recompiles(torch_saw) == 0


# --- 2. a smaller last batch is the loader's ---------------------------------------------

LOOP = """\
import sys

sys.path.insert(0, {jobs!r})
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch_counts import backend, facts_path, per_frame, write_facts

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2))
compiled = torch.compile(model, backend=backend)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = TensorDataset(torch.randn(104, 16), torch.randint(0, 2, (104,)))
loader = DataLoader(data, batch_size=64, shuffle=True{drop})  # 64 and 40 an epoch
for epoch in range(2):
    for x, y in loader:
        loss = nn.functional.cross_entropy(compiled(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
{facts}"""


def test_a_smaller_last_batch_of_a_plain_loop_is_the_loaders(tmp_path: Path) -> None:
    """104 samples in batches of 64, two epochs: the batch of 40 recompiles once. The advice
    is the loader's drop_last (or the batch dim marked at the call that passes `x`), not a
    collator's padding; before: "mark_dynamic(args[0], 0)", torch's wrapper's own name.
    drop_last=True applied, torch counts no recompile."""
    job = tmp_path / "train.py"

    def source(drop: str = "") -> str:
        return LOOP.format(jobs=JOBS, drop=drop, facts=FACTS)

    r = _one_recompile(job, source())
    said = r["suggestion"]
    call = _line(source(), "compiled(x)")
    assert r["failed_guard"].endswith("dim 0 changed 64 → 40")
    assert f"A smaller batch (64 → 40) reached the model at train.py:{call}" in said, said
    assert "`DataLoader(..., drop_last=True)`" in said and "mark_dynamic(x, 0)" in said, said
    assert "collator" not in said and "args[0]" not in said, said
    _no_recompile(job, source(", drop_last=True"))


SLICED = """\
import sys

sys.path.insert(0, {jobs!r})
import torch
from torch import nn
from torch_counts import backend, facts_path, per_frame, write_facts

torch.manual_seed(0)
model = nn.Sequential(nn.Embedding(50, 16), nn.Linear(16, 50))
compiled = torch.compile(model, backend=backend)
tokens = torch.randint(0, 50, (60, 4))  # (time, batch), cut into chunks of 8 steps


def get_batch(source, i):
    seq_len = min(8, len(source) - 1 - i)
    return source[i:i + seq_len], source[i + 1:i + 1 + seq_len]


for i in range(0, tokens.size(0) - 1, 8):  # 7 chunks of 8, the last of 3
    data, targets = get_batch(tokens, i)
{mark}    out = compiled(data)
    nn.functional.cross_entropy(out.view(-1, 50), targets.reshape(-1)).backward()
{facts}"""


def test_a_shorter_last_slice_of_a_users_own_batches_names_no_loader(tmp_path: Path) -> None:
    """pytorch/examples' word language model (a twenty-fifth look) cuts its data with
    get_batch in a range loop, no DataLoader: the last chunk is shorter and recompiles.
    The advice said "`drop_last=True` on that loader", a loader the job never makes; it
    says now what removes it in a loop of the user's own, without calling dim 0 a batch
    (a file with no DataLoader), and the mark it names, applied at the call, leaves torch no
    recompile."""
    job = tmp_path / "train.py"

    def source(mark: str = "") -> str:
        return SLICED.format(jobs=JOBS, mark=mark, facts=FACTS)

    r = _one_recompile(job, source())
    said = r["suggestion"]
    assert r["failed_guard"].endswith("dim 0 changed 8 → 3"), r
    assert "Dropping or padding that last piece" in said and "on that loader" not in said, said
    # dim 0 here is the sequence (a look 27 word-language model: "a smaller batch (35 → 28)")
    call = _line(source(), "compiled(data)")
    assert said.startswith(f"Dim 0 came in smaller once (8 → 3) at train.py:{call}"), said
    assert "batch dim" not in said and "smaller batch" not in said, said
    (mark,) = re.findall(r"`(torch\._dynamo\.mark_dynamic\(data, 0\))`", said)
    _no_recompile(job, source(f"    {mark}\n"))


FIT = """\
import sys

sys.path.insert(0, {jobs!r})
import minifit
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch_counts import backend, facts_path, per_frame, write_facts

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2))
data = TensorDataset(torch.randn(104, 16), torch.randint(0, 2, (104,)))
loader = DataLoader(data, batch_size=64{drop})
minifit.fit(torch.compile(model, backend=backend), loader, epochs=2)
{facts}"""


def test_a_smaller_last_batch_under_a_frameworks_loop_is_the_loaders(tmp_path: Path) -> None:
    """The same data under a framework's training loop (minifit, installed): the batch comes
    from the framework's loop, and the advice is drop_last on the DataLoader the user gives
    it, not a collator's padding or ACCELERATE_DYNAMO_USE_DYNAMIC. Applied, no recompile."""
    env = _installed(tmp_path, "minifit")
    job = tmp_path / "train.py"

    def source(drop: str = "") -> str:
        return FIT.format(jobs=JOBS, drop=drop, facts=FACTS)

    said = _one_recompile(job, source(), env)["suggestion"]
    assert "A smaller batch (64 → 40) reached the model from minifit's loop" in said, said
    assert "(`training_epoch` in minifit/loops.py:" in said, said
    assert "the DataLoader you give minifit" in said and "`drop_last=True`" in said, said
    # no mark is advised under a framework's loop, so none is said to save the compile
    # (look 28: a Trainer's "marking it saves this one compile")
    assert "automatic dynamic" in said and "dynamic=True saves this one compile" in said, said
    assert "marking" not in said, said
    assert "collator" not in said and "ACCELERATE" not in said, said
    _no_recompile(job, source(", drop_last=True"), env)


PADDED = """\
import sys

sys.path.insert(0, {jobs!r})
import minifit
import torch
from torch import nn
from torch.utils.data import DataLoader
from torch_counts import backend, facts_path, per_frame, write_facts

LENGTH = {length}


class Tokens(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(100, 16)
        self.head = nn.Linear(16, 2)

    def forward(self, ids):
        return self.head(self.embed(ids).mean(dim=1))


def pad(samples):
    # each batch padded to its longest sequence (or to LENGTH)
    n = LENGTH or max(len(s) for s, _ in samples)
    ids = torch.zeros(len(samples), n, dtype=torch.long)
    for i, (s, _) in enumerate(samples):
        ids[i, : len(s)] = s
    return ids, torch.tensor([y for _, y in samples])


torch.manual_seed(0)
# three batches an epoch, of 64, 64 and 40 sequences, the longest 20, 28 and 11 long
lengths = [8 + i % 13 for i in range(64)] + [10 + i % 19 for i in range(64)]
lengths += [5 + i % 7 for i in range(40)]
data = [(torch.randint(1, 100, (n,)), n % 2) for n in lengths]
loader = DataLoader(data, batch_size=64, collate_fn=pad{drop})
minifit.fit(torch.compile(Tokens(), backend=backend), loader, epochs=2)
{facts}"""


def test_a_collators_padding_is_named_only_where_a_sequence_dim_varies(tmp_path: Path) -> None:
    """Batches padded to their own longest sequence under a framework's loop, and a smaller
    last batch: the sequence dim's recompile is the collator's padding; the batch dim's is
    the loader's last batch (drop_last), with no collator in its advice. Both applied (pad
    to one length, drop_last), torch counts no recompile."""
    env = _installed(tmp_path, "minifit")
    job = tmp_path / "train.py"

    def source(length: int = 0, drop: str = "") -> str:
        return PADDED.format(jobs=JOBS, length=length, drop=drop, facts=FACTS)

    report, torch_saw = _run(job, source(), env)
    assert len(report["recompiles"]) == _recompiles(torch_saw) == 2
    sequence, batch = report["recompiles"]
    assert re.search(r"dim 1 changed \d+ → \d+$", sequence["failed_guard"]), sequence
    assert "a collator padding each batch" in sequence["suggestion"], sequence["suggestion"]
    assert "ACCELERATE" not in sequence["suggestion"]  # minifit is no accelerate
    assert batch["failed_guard"].endswith("dim 0 changed 64 → 40"), batch
    assert "`drop_last=True`" in batch["suggestion"], batch["suggestion"]
    assert "collator" not in batch["suggestion"] and "pad_to_multiple_of" not in batch["suggestion"]
    report, torch_saw = _run(job, source(length=32, drop=", drop_last=True"), env)
    assert _recompiles(torch_saw) == 0 and report["recompiles"] == []


LIGHTNING = """\
import sys

sys.path.insert(0, {jobs!r})
import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch_counts import backend, facts_path, per_frame, write_facts


class Net(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2))

    def forward(self, x):
        return self.body(x)

    def training_step(self, batch, i):
        x, y = batch
        return nn.functional.cross_entropy(self(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


torch.manual_seed(0)
data = TensorDataset(torch.randn(104, 16), torch.randint(0, 2, (104,)))
trainer = L.Trainer(max_epochs=2, accelerator="cpu", logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False)
trainer.fit(torch.compile(Net(), backend=backend), DataLoader(data, batch_size=64{drop}))
{facts}"""


def test_a_smaller_last_batch_under_lightning_is_the_loaders(tmp_path: Path) -> None:
    """Lightning's Trainer compiles the module's training_step and calls it from its loop:
    the last batch of 40 is the loader's (before: "a collator padding each batch ...
    ACCELERATE_DYNAMO_USE_DYNAMIC=1"). drop_last=True applied, no recompile."""
    pytest.importorskip("lightning")
    job = tmp_path / "train_lit.py"

    def source(drop: str = "") -> str:
        return LIGHTNING.format(jobs=JOBS, drop=drop, facts=FACTS)

    r = _one_recompile(job, source())
    said = r["suggestion"]
    assert "A smaller batch (64 → 40) reached the model from Lightning's loop" in said, said
    assert "`drop_last=True`" in said and "collator" not in said and "ACCELERATE" not in said
    assert "trainer.fit" not in said and "train_lit.py" not in said, said
    _no_recompile(job, source(", drop_last=True"))


# --- 3. a framework's validation loop: nothing to change ---------------------------------

FIT_VALIDATE = """\
import sys

sys.path.insert(0, {jobs!r})
import minifit
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch_counts import backend, facts_path, per_frame, write_facts


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(16, 32), nn.Dropout(0.1), nn.ReLU(), nn.Linear(32, 2))

    def forward(self, x):
        return self.body(x)


def loader(n):
    return DataLoader(TensorDataset(torch.randn(n, 16), torch.randint(0, 2, (n,))), batch_size=16)


torch.manual_seed(0)
compiled = torch.compile(Net(), backend=backend)
minifit.fit(compiled, loader(64), loader(32), epochs=2)
{facts}"""


def test_a_mode_switch_in_a_frameworks_validation_loop_is_nothing_to_change(
    tmp_path: Path,
) -> None:
    """A framework (minifit, installed) trains the compiled model and validates it in eval()
    under no_grad: one graph per mode. The advice names the framework's validation loop and
    says there is nothing to change; it never sends the user to their `minifit.fit(...)`
    line (before: "at train.py:25, call the module you passed to torch.compile rather than
    the compiled one" - the line that calls fit). torch's count is the mode's one graph,
    which the report says stays."""
    env = _installed(tmp_path, "minifit")
    job = tmp_path / "train.py"
    source = FIT_VALIDATE.format(jobs=JOBS, facts=FACTS)
    r = _one_recompile(job, source, env)
    said = r["suggestion"]
    assert said.startswith("Expected: one graph per mode."), said
    assert "Nothing to change: one graph per mode is expected here." in said, said
    assert "minifit's validation loop (`validation_loop` in minifit/loops.py:" in said, said
    assert "called by minifit's `training_epoch`" in said, said
    assert "line 16 `model.eval()`" in said and "`with torch.no_grad():`" in said, said
    fit = _line(source, "minifit.fit(")
    assert f"train.py:{fit}" not in said and "call the module you passed" not in said, said
    assert "set_stance" not in said, said


BROKEN = """\
import sys

sys.path.insert(0, {jobs!r})
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch_counts import backend, facts_path, per_frame, write_facts


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(16, 32), nn.Linear(32, 2)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        scale = h.abs().max().item()  # a graph break: the rest of forward is its own frame
        return self.fc2(h / scale)


torch.manual_seed(0)
model = Net()
compiled = torch.compile(model, backend=backend)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = TensorDataset(torch.randn(100, 16), torch.randint(0, 2, (100,)))
loader = DataLoader(data, batch_size=32{drop})  # 32, 32, 32 and 4 an epoch
for epoch in range(2):
    for x, y in loader:
        {mark}loss = nn.functional.cross_entropy(compiled(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
{facts}"""


def test_a_last_batch_after_a_graph_break_is_not_marked_away(tmp_path: Path) -> None:
    """The batch of 4 recompiles the code after the break on `h`, a local of forward: the
    advice is drop_last, not a mark on the batch passed, which torch's own count shows does
    not reach that frame (a sixth look applied it and the frame recompiled all the same);
    drop_last applied, that frame's recompile is gone."""
    job = tmp_path / "train.py"

    def source(drop: str = "", mark: str = "") -> str:
        return BROKEN.format(jobs=JOBS, drop=drop, mark=mark, facts=FACTS)

    report, torch_saw = _run(job, source())
    (r,) = [r for r in report["recompiles"] if r["failed_guard"].endswith("dim 0 changed 32 → 4")
            and "after line" in r["frame"]]  # fmt: skip
    said = r["suggestion"]
    assert "`DataLoader(..., drop_last=True)`" in said and "mark_dynamic" not in said, said
    assert "the code after a graph break" in said, said
    resume = torch_saw["per_frame"]["1"]
    _, marked = _run(job, source(mark="torch._dynamo.mark_dynamic(x, 0)\n        "))
    assert marked["per_frame"]["1"] == resume  # the mark on x: the frame recompiles as before
    _, dropped = _run(job, source(drop=", drop_last=True"))
    assert dropped["per_frame"]["1"] == resume - 1


GRAD_IN_PREDICT = """\
import sys

sys.path.insert(0, {jobs!r})
import torch
from torch import nn
from torch_counts import backend, facts_path, per_frame, write_facts

torch.manual_seed(0)
first, second = nn.Linear(8, 8), nn.Linear(8, 4)
layer = torch.compile(second, backend=backend)
opt = torch.optim.SGD([*first.parameters(), *second.parameters()], lr=0.1)
for step in range(3):
    h = first(torch.randn(4, 8)).detach()  # each layer trained apart, as forward-forward's
    layer(h).pow(2).mean().backward()
    opt.step()
    opt.zero_grad()
h = first(torch.randn(4, 8))  # its predict(): grad on, so h requires grad
print(layer({arg}).argmax(1))
{facts}"""


def test_an_input_that_requires_grad_once_is_detached_at_the_users_call(tmp_path: Path) -> None:
    """Look 28 (pytorch/examples' forward-forward, predict() with grad on): "x requires_grad
    changed ... Call the compiled model with the same requires_grad every time, or convert
    the input first". It names the argument at the user's call and `.detach()` there;
    applied, torch compiles no second graph."""
    job = tmp_path / "train.py"

    def source(arg: str = "h") -> str:
        return GRAD_IN_PREDICT.format(jobs=JOBS, arg=arg, facts=FACTS)

    r = _one_recompile(job, source())
    said = r["suggestion"]
    call = _line(source(), "print(layer(")
    assert said.startswith(f"`h`, which the call at train.py:{call} passes, requires grad"), said
    (fixed,) = re.findall(r"pass `(h\.detach\(\))` there", said)
    _no_recompile(job, source(fixed))
