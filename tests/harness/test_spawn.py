"""The early worker: started before the options are parsed, used by the run it was started
for, stopped (with its folder) when the options are wrong or the run needs other caches."""

from __future__ import annotations

import inspect
import signal
import subprocess
from pathlib import Path

import pytest

from compilediag.harness import spawn
from compilediag.harness.runner import run_worker
from compilediag.harness.target import Target
from compilediag.harness.worker_types import WorkerSpec
from tests.conftest import run_cli

MODEL = """\
import torch
class M(torch.nn.Module):
    def forward(self, x):
        return (x * 2).relu()
def get_inputs():
    return (torch.randn(2, 4),)
"""


@pytest.fixture
def model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(spawn, "_early", None)
    monkeypatch.setattr(spawn.tempfile, "tempdir", str(tmp_path))  # our folders land here
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    yield path
    spawn._drop_early()


STOPPED = (-signal.SIGINT, 1, -signal.SIGKILL)  # asked to stop (Ctrl-C), or made to


def spec(model: Path, cold: bool = False) -> WorkerSpec:
    return WorkerSpec(Target(str(model)), backend="eager", timings=False, cold=cold)


def ours(tmp: Path) -> list[Path]:
    return sorted(tmp.glob("compilediag-*"))


def test_the_run_uses_the_worker_started_for_it(model: Path) -> None:
    spawn.start_early(["explain", str(model), "--backend", "eager"])
    early = spawn._early
    assert early is not None and early.child.proc.poll() is None  # importing torch, or waiting
    with spawn.workdir() as work:
        assert work == early.work
        run = run_worker(spec(model), work, timeout=120)
    assert run.result.error is None and run.result.calls
    assert early.child.proc.wait(timeout=30) == 0  # it ran the model and ended by itself
    assert not ours(model.parent)


def test_a_worker_started_with_other_caches_is_stopped_and_replaced(model: Path) -> None:
    spawn.start_early(["explain", str(model), "--cold"])
    early = spawn._early
    assert early is not None and early.cold
    with spawn.workdir() as work:
        run = run_worker(spec(model, cold=False), work, timeout=120)
    assert run.result.error is None and run.result.calls
    assert early.child.proc.returncode in STOPPED  # stopped unused: a fresh worker ran the model
    assert not run.result.environment.cold


def test_the_commands_started_early_are_those_that_run_a_model() -> None:
    """spawn.py can't import the CLI (typer) to ask: the commands with the run options
    (--cold among them) are the ones it must know."""
    from compilediag.cli.app import app

    runs = {
        c.name or c.callback.__name__.replace("_", "-")
        for c in app.registered_commands
        if c.callback and "cold" in inspect.signature(c.callback).parameters
    }
    assert runs == spawn.RUN_COMMANDS


def test_commands_that_run_nothing_start_no_worker(model: Path) -> None:
    for argv in (["report", "trace/"], ["explain", "--help"], ["render", "r.json"], []):
        spawn.start_early(argv)
        assert spawn._early is None, argv


def test_an_unused_worker_is_stopped_with_its_folder(model: Path) -> None:
    spawn.start_early(["recompiles", str(model)])
    early = spawn._early
    assert early is not None and early.work.exists()
    spawn._drop_early()
    assert early.child.proc.returncode in STOPPED
    assert not early.work.exists()


def test_a_usage_error_leaves_no_worker_and_no_folder(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = run_cli("explain", "missing.py", cwd=tmp_path, env={"TMPDIR": str(tmp)})
    assert proc.returncode == 2 and "does not exist" in proc.stderr, proc.stderr
    assert not ours(tmp)
    left = subprocess.run(["pgrep", "-f", str(tmp)], capture_output=True, text=True).stdout
    assert not left.split()
