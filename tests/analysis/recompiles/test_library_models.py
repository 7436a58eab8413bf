"""Models no one here wrote, wherever the user stands: torchvision's Faster R-CNN and Mask
R-CNN (traces recorded with torch 2.14.1 and torchvision 0.29.1 by record_traces.py, with
torch's own counts taken in the same run), and transformers' generate() on a GPT-2 made
from a config, run live. The counts are torch's; the sites, paths and advice are the same
from any folder (the repository, which holds the venv in CI; the model's folder; a folder
elsewhere), name no machine path, and say what the user can do from their side."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, SAMPLES, TRACES, compilediag_files, run_json
from tests.test_paths import _findings, _strings

# the whole suite's (`pytest --full`): end-to-end runs, minutes on 2 cores (docs/tests.md)
pytestmark = pytest.mark.full

GENERATE = SAMPLES / "library" / "gpt2_generate.py"
MACHINE = ("/site-packages/", "/dist-packages/", "/lib/python3.")


def _no_machine_path(report: dict, cwd: Path) -> None:
    """No library's or Python's file by its machine path, no compilediag file; a user's
    file by its path from `cwd` where it lies beneath it (else where it is)."""
    paths = [s for s in _strings(report) if ".py" in s]
    assert paths, "the report names files"
    bad = [p for p in paths if any(m in p for m in MACHINE) or p.startswith(f"{cwd}/")]
    assert not bad, bad
    assert not compilediag_files(json.dumps(report))


def _same_file_names(obj: object) -> object:
    """A user's file is named from the folder the command ran in where it lies beneath it
    (`sample_models/library/x.py` from the repository), else by its path: the findings
    from two folders agree once those names are cut to the file; library files are kept
    whole."""
    if isinstance(obj, dict):
        return {k: _same_file_names(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_same_file_names(v) for v in obj]
    if isinstance(obj, str):  # an object's id in torch's guard text, a time: new each run
        obj = re.sub(r"___check_obj_id\((.*?), \d+\)", r"___check_obj_id(\1, ID)", obj)
        obj = re.sub(r"about [\d.]+ ms", "about T ms", obj)
    if isinstance(obj, str) and ".py" in obj:
        return re.sub(
            r"(?<![\w/.])/?(?!torch/|torchvision/|transformers/)(?:[\w.-]+/)+(?=[\w.-]+\.py\b)",
            "",
            obj,
        )
    return obj


def _from_three_folders(tmp_path: Path, target: Path, *args: str) -> dict:
    """The findings of one command run from the repository, the target's folder and a
    folder elsewhere; they must be the same, and name no machine path."""
    runs = []
    for cwd in (ROOT, target.parent, tmp_path):
        report, proc = run_json(*args[:1], os.path.relpath(target, cwd), *args[1:], cwd=cwd)
        assert proc.returncode == 0, proc.stderr
        _no_machine_path(report, cwd)
        runs.append(report)
    first, *others = (_same_file_names(_findings(r)) for r in runs)
    for other in others:
        assert other == first
    return runs[0]


def _counts_are_torchs(report: dict, counts: dict) -> None:
    """Graphs are CompileCounter's frames, breaks the graph_breaks log's, recompiles the
    recompiles log's (torch_counts)."""
    s = report["summary"]
    assert (s["graphs"], s["graph_breaks"], s["recompiles"]) == (
        counts["frames"], counts["graph_breaks"], counts["recompiles_log"],
    )  # fmt: skip


# --- torchvision, from recorded traces --------------------------------------------------


def _recorded(name: str) -> list[tuple[Path, dict]]:
    """(trace, torch's counts from the same run) for each torch that recorded the job."""
    out = []
    for folder in sorted(TRACES.iterdir()):
        manifest = folder / "manifest.json"
        entry = json.loads(manifest.read_text()).get(name) if manifest.exists() else None
        if entry and "torch_counts" in entry:
            out.append((folder / entry["files"][0], entry["torch_counts"]))
    return out


def _unpacked(trace: Path, folder: Path) -> Path:
    """A trace stored gzipped (a big one), as torch wrote it."""
    if trace.suffix != ".gz":
        return trace
    folder.mkdir()
    out = folder / trace.stem
    with gzip.open(trace, "rb") as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


DETECTION = [
    pytest.param(trace, counts, id=f"{trace.parent.name}-{trace.name.split('.')[0]}")
    for name in ("fasterrcnn", "maskrcnn")
    for trace, counts in _recorded(name)
]


@pytest.mark.parametrize("trace,counts", DETECTION)
def test_torchvision_detection_counts_are_torchs_and_the_same_from_any_folder(
    trace: Path, counts: dict, tmp_path: Path
) -> None:
    """Graphs are CompileCounter's frames, breaks the graph_breaks log's, recompiles the
    recompiles log's (Mask R-CNN: 60, 55, 43; a frame whose first compile made no graph
    recompiles without a graph of its own, so CompileCounter's graphs per frame less one
    says 36). Every break is a line of torchvision's, told as such; its advice is what
    the user can do: a setting, or compiling around torchvision's code."""
    trace = _unpacked(trace, tmp_path / "trace")
    report = _from_three_folders(tmp_path, trace, "report")
    _counts_are_torchs(report, counts)
    assert report["graph_breaks"]
    for b in report["graph_breaks"]:
        assert b["library"] == "torchvision"
        assert b["library_frame"]["file"].startswith("torchvision/")
        assert b["suggestion"].startswith("The line is torchvision's"), b["suggestion"]
    for r in report["recompiles"]:
        # the model's own forward, called with the user's images, is told to mark those
        # (#36); a frame torchvision calls itself can't be marked
        entry = r["compile_id"].startswith("0/")
        assert ("mark_dynamic(images" in r["suggestion"]) == entry, r


# --- transformers, live -----------------------------------------------------------------

# torch's own counts for the sample, in a process of their own: CompileCounter behind the
# eager backend, the graph_breaks and recompiles logs (tests/fixtures/run_jobs/torch_counts)
COUNT = """
import importlib.util, json, sys, torch
sys.path.insert(0, sys.argv[2])
import torch_counts
spec = importlib.util.spec_from_file_location("sample", sys.argv[1])
sample = importlib.util.module_from_spec(spec); spec.loader.exec_module(sample)
with torch.no_grad():
    torch.compile(sample.get_model(), backend=torch_counts.backend)(*sample.get_inputs())
torch_counts.write_facts(sys.argv[3])
"""


def test_transformers_generate_counts_sites_and_advice_from_any_folder(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    report = _from_three_folders(tmp_path, GENERATE, "explain", "--backend", "eager")
    facts = tmp_path / "facts.json"
    subprocess.run(
        [sys.executable, "-c", COUNT, str(GENERATE), str(ROOT / "tests/fixtures/run_jobs"),
         str(facts)],
        check=True, capture_output=True, cwd=tmp_path,
    )  # fmt: skip
    counts = json.loads(facts.read_text())
    _counts_are_torchs(report, counts)
    # the breaks: under the user's call of generate(), inside transformers
    assert report["graph_breaks"]
    for b in report["graph_breaks"]:
        assert b["library"] == "transformers" and b["file"].endswith("gpt2_generate.py")
    # the recompiles of generate()'s growing sequence: transformers' static cache, not a
    # mark_dynamic of transformers' locals; each frame where it is
    grows = [r for r in report["recompiles"] if r["cause"] in ("shape", "bounded")]
    assert grows
    for r in grows:
        assert 'cache_implementation="static"' in r["suggestion"], r
        assert "mark_dynamic" not in r["suggestion"]
        assert r["file"].startswith("transformers/"), r


STATIC = """
import json, sys, torch
sys.path.insert(0, sys.argv[1])
import torch_counts
from transformers import GPT2Config, GPT2LMHeadModel
torch.manual_seed(0)
config = GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=64, n_positions=32,
                    bos_token_id=1, eos_token_id=2)
lm = GPT2LMHeadModel(config).eval()
lm.forward = torch.compile(lm.forward, backend=torch_counts.backend)
frames = []
with torch.no_grad():
    for prompt in ([1, 5, 7], [3, 4, 9]):
        lm.generate(torch.tensor([prompt]), max_new_tokens=3, do_sample=False,
                    pad_token_id=0, cache_implementation=sys.argv[2] or None)
        frames.append(torch_counts.counter.frame_count)
print(json.dumps(frames))
"""


def test_the_static_cache_advice_stops_recompiles_as_the_sequence_grows() -> None:
    """The advice applied: the model's forward compiled, generate() with a static cache and
    the same max_new_tokens. The prompt and the one-token steps get a graph each, and the
    growing sequence none (the default cache compiles once more for it); a second prompt
    compiles nothing."""
    pytest.importorskip("transformers")
    runs = {}
    for cache in ("", "static"):
        proc = subprocess.run(
            [sys.executable, "-c", STATIC, str(ROOT / "tests/fixtures/run_jobs"), cache],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        runs[cache] = json.loads(proc.stdout.strip().splitlines()[-1])
    static_first, static_more = runs["static"]
    assert static_more == static_first, runs
    assert runs[""][0] > static_first, runs
