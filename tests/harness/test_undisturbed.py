"""A diagnosis sees the compile the user gets: it leaves torch's temp folder, cache keys and
caches as the user's own run has them (#37). Checked against torch's own records: the FX
graph cache hits and misses of a plain run, traced with TORCH_TRACE, and of compilediag's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_json

# the whole suite's (`pytest --full`): end-to-end runs, tens of seconds each on 2 cores
pytestmark = pytest.mark.full

MODEL = """\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return (self.fc(x) * 2).relu().sin()


def get_model():
    return Net()


def get_inputs():
    return (torch.randn(4, 8),)


if __name__ == "__main__":  # the user's own run: inference, as explain compiles it
    torch.manual_seed(0)
    with torch.no_grad():
        torch.compile(get_model())(*get_inputs())
"""


def _cache_records(trace: Path) -> dict[str, int]:
    """torch's own FX graph cache records in a trace folder, counted by kind."""
    out: dict[str, int] = {}
    for f in trace.iterdir():
        for line in f.read_text().splitlines():
            for kind in ("fx_graph_cache_hit", "fx_graph_cache_miss"):
                if f'"{kind}"' in line and not line.startswith("\t"):
                    out[kind] = out.get(kind, 0) + 1
    return out


@pytest.mark.slow
def test_a_diagnosis_hits_the_cache_the_users_plain_run_filled(tmp_path: Path) -> None:
    """Before: the worker's TMPDIR and INDUCTOR_PROVENANCE=1 (a cache-key component) made
    explain miss every graph a plain run had cached, and compile cold."""
    (tmp_path / "model.py").write_text(MODEL)
    tmp = tmp_path / "tmp"  # the user's temp folder, where torch keeps its cache
    tmp.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INDUCTOR_", "TORCH_"))}
    env = {**env, "TMPDIR": str(tmp), "TORCH_TRACE": str(tmp_path / "plain")}
    subprocess.run([sys.executable, "model.py"], cwd=tmp_path, env=env, check=True, timeout=300)
    plain = _cache_records(tmp_path / "plain")
    assert sum(plain.values()) == 1, plain  # one graph (cold, or from a cache set up earlier)

    env.pop("TORCH_TRACE")
    report, proc = run_json("explain", "model.py", "--no-timings", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    caches = report["compile_time"]["caches"]
    assert caches.get("fx_graph_cache_hit") == 1, caches  # the entry the plain run used
    assert "fx_graph_cache_miss" not in caches, caches
    assert not list(tmp.glob("compilediag-*"))  # the run's own folder went with it
