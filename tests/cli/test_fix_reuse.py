"""`fix --apply` after a dry `fix` of the same file, torch and options applies that run's
verification instead of running it all again (#53: a dry run took 387 s, then --apply
118 s more). The model file counts its own loads: every run of the worker - the model as
it is, each patched copy - loads it once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import SAMPLES, run_cli

# the whole suite's (`pytest --full`): end-to-end runs, minutes on 2 cores (docs/tests.md)
pytestmark = pytest.mark.full

COUNTED = """import os

with open(os.environ["MODEL_LOADS"], "a") as _f:  # one mark a load: a run of the worker
    _f.write("x")
"""


def test_apply_after_a_dry_run_reuses_its_verification(tmp_path: Path) -> None:
    model = tmp_path / "item_break.py"
    model.write_text(COUNTED + (SAMPLES / "item_break.py").read_text())
    original = model.read_text()
    loads = tmp_path / "loads"
    cache = tmp_path / "cache"
    env = {"MODEL_LOADS": str(loads), "COMPILEDIAG_CACHE_DIR": str(cache)}
    args = ("fix", "item_break.py", "--backend", "eager", "--repeat", "2", "--warmup", "1")

    dry = run_cli(*args, cwd=tmp_path, env=env)
    assert dry.returncode == 0, dry.stderr
    assert "GB0124 gone" in dry.stdout and model.read_text() == original
    ran = loads.read_text().count("x")
    assert ran >= 2  # the model as it is, and its patched copy
    assert [p.parent.name for p in cache.glob("*/*.json")] == ["fix"]  # compilediag's own

    # another option: another verification, run (and kept beside the first)
    other = run_cli(*args[:-2], "--warmup", "2", cwd=tmp_path, env=env)
    assert other.returncode == 0, other.stderr
    assert loads.read_text().count("x") == 2 * ran
    assert "reused" not in other.stderr

    applied = run_cli(*args, "--apply", cwd=tmp_path, env=env)
    assert applied.returncode == 0, applied.stderr
    assert loads.read_text().count("x") == 2 * ran  # nothing ran: no load, no compile
    assert "reused the verification of " in applied.stderr
    assert "the same file, torch and options" in applied.stderr
    assert "GB0124 gone" in applied.stdout  # the dry run's evidence, shown again
    assert "scale = y.abs().max()  #" in model.read_text()
    assert (tmp_path / "item_break.py.orig").read_text() == original
    assert len(list(cache.glob("fix/*.json"))) == 1  # the one used is gone, the other kept


def test_apply_of_a_changed_file_verifies_again(tmp_path: Path) -> None:
    model = tmp_path / "item_break.py"
    model.write_text(COUNTED + (SAMPLES / "item_break.py").read_text())
    loads = tmp_path / "loads"
    env = {"MODEL_LOADS": str(loads), "COMPILEDIAG_CACHE_DIR": str(tmp_path / "cache")}
    args = ("fix", "item_break.py", "--backend", "eager", "--repeat", "2", "--warmup", "1")
    assert run_cli(*args, cwd=tmp_path, env=env).returncode == 0
    ran = loads.read_text().count("x")
    model.write_text(model.read_text() + "\n# edited after the dry run\n")
    applied = run_cli(*args, "--apply", cwd=tmp_path, env=env)
    assert applied.returncode == 0, applied.stderr
    assert "reused" not in applied.stderr
    assert loads.read_text().count("x") == 2 * ran  # verified afresh
    assert "scale = y.abs().max()  #" in model.read_text()
    assert os.path.exists(tmp_path / "item_break.py.orig")
