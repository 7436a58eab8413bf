"""Paths as the user reads them, wherever the command runs: a library's file from its
package down (a venv inside the project folder too), compilediag's own frames never a
site, the same findings from any folder."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from compilediag.paths import is_library_file, portable_path, portable_text
from tests.conftest import ROOT, compilediag_files, run_json

VENV_IN_PROJECT = "/home/u/proj/.venv/lib/python3.11/site-packages/torchvision/ops/boxes.py"


def test_a_library_in_a_venv_inside_the_project_is_shown_from_its_package() -> None:
    assert portable_path(VENV_IN_PROJECT, "/home/u/proj") == "torchvision/ops/boxes.py"
    assert portable_path("/home/u/proj/models/net.py", "/home/u/proj") == "models/net.py"
    assert is_library_file(VENV_IN_PROJECT)
    note = f"filter_proposals at {VENV_IN_PROJECT}:54 was not compiled"
    assert (
        portable_text(note, "/elsewhere")
        == "filter_proposals at torchvision/ops/boxes.py:54 was not compiled"
    )


def test_compilediags_own_frames_are_never_the_users_through_a_link(tmp_path: Path) -> None:
    """A checkout reached through a symlink: the worker's frames carry the other path."""
    link = tmp_path / "checkout"
    link.symlink_to(ROOT)
    assert is_library_file(str(link / "compilediag" / "worker.py"))
    assert not is_library_file(str(link / "sample_models" / "graph_breaks.py"))


def _strings(obj: object) -> list[str]:
    if isinstance(obj, dict):
        return [s for k, v in obj.items() for s in _strings(v)]
    if isinstance(obj, list):
        return [s for v in obj for s in _strings(v)]
    return [obj] if isinstance(obj, str) else []


# notes that follow the machine, not the model: its load (busy cores), what its compile
# cost (its caches, its speed)
MACHINE_NOTES = ("unreliable_timing", "timing_threads", "compile_cost")


def _findings(report: dict) -> dict:
    """What a report found, without times, the notes that follow the machine, and the
    target's own path."""
    keep = ("graph_breaks", "recompiles", "graphs", "recompile_limit_hits", "notes", "kernels")
    timed = re.compile(r"(_s|_ms|time|compile_s)$")
    report = {**report, "notes": [
        n for n in report.get("notes") or [] if n.get("kind") not in MACHINE_NOTES
    ]}  # fmt: skip

    def strip(obj: object) -> object:
        if isinstance(obj, dict):
            return {k: strip(v) for k, v in obj.items() if not timed.search(k)}
        if isinstance(obj, list):
            return [strip(v) for v in obj]
        return obj

    return {k: strip(report.get(k)) for k in keep}


def test_the_same_findings_from_any_folder(tmp_path: Path) -> None:
    """`recompiles` on a model whose frame is torch's own (nn.Sequential), run from the
    repository (which may hold the venv: CI's does), from the model's folder and from a
    folder elsewhere: the same findings, no machine path, no compilediag file."""
    model = ROOT / "sample_models" / "changing_batch.py"
    runs = {}
    for cwd in (ROOT, model.parent, tmp_path):
        report, proc = run_json("recompiles", os.path.relpath(model, cwd), cwd=cwd)
        assert proc.returncode == 0, proc.stderr
        runs[str(cwd)] = _findings(report)
    first, *others = runs.values()
    assert all(o == first for o in others)
    paths = [s for s in _strings(first) if ".py" in s]
    assert paths, "the findings name files"
    assert not [
        p for p in paths if "/site-packages/" in p or compilediag_files(p) or p.startswith("/")
    ]
    assert json.dumps(first).count("torch/nn/modules/container.py") >= 1


def test_python_s_own_files_are_named_from_its_folder_and_are_not_an_installed_library() -> None:
    """`copy.py` from any Python's library folder, never the machine's path; a break there
    under the user's call is fixed at that call (not "a library's line you don't edit")."""
    from compilediag.paths import installed_package

    stdlib = "/root/.pyenv/versions/3.11.7/lib/python3.11/copy.py"
    assert portable_path(stdlib, "/elsewhere") == "copy.py"
    assert portable_text(f"the graph break at {stdlib}:76", "/x") == "the graph break at copy.py:76"
    assert installed_package(stdlib) == ""
    assert installed_package(VENV_IN_PROJECT) == "torchvision"


def test_a_folder_named_torch_is_not_torchs_code() -> None:
    """A twenty-fifth look on a machine whose venv is /opt/torch/.venv: every library's file
    held `/torch/`, and a break in transformers read "The break is inside torch itself".
    torch's files are those from its package folder down (installed, or a source
    checkout's); a venv or a project in a folder named torch is not torch's."""
    from compilediag.analysis.compile.frameworks import framework_of
    from compilediag.paths import Owner, in_torch, is_library_file, owner_of

    venv = "/opt/torch/.venv/lib/python3.12/site-packages/"
    assert owner_of(venv + "transformers/configuration_utils.py") == Owner.LIBRARY
    assert owner_of(venv + "torch/nn/modules/module.py") == Owner.TORCH
    assert owner_of("/home/me/pytorch/torch/_dynamo/eval_frame.py") == Owner.TORCH
    for mine in ("/opt/torch/job/train.py", "/home/me/torch/model.py"):
        assert not in_torch(mine) and not is_library_file(mine) and owner_of(mine) == Owner.USER
    name, _ = framework_of(venv + "torch/nn/modules/module.py", venv + "transformers/x.py") or (
        "",
        "",
    )
    assert name == "transformers"
