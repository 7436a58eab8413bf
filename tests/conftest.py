from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_models"
TRACES = Path(__file__).parent / "fixtures" / "traces"


def trace_sets() -> list[Path]:
    """Every recorded fixture folder (one per torch version and device)."""
    return sorted(p for p in TRACES.iterdir() if p.is_dir())


def fixture_trace(name: str, folder: Path | None = None) -> Path:
    folder = folder or TRACES / "torch-2.13.0-cpu"
    return folder / f"{name}.log"


def expected_breaks(sample: str) -> list[int]:
    """The break lines a sample model's docstring promises ("... at line 22 ...")."""
    doc = (SAMPLES / sample).read_text().split('"""')[1]
    if "no graph breaks" in doc or "no breaks" in doc:
        return []
    return [int(n) for n in re.findall(r"line (\d+)", doc)]


def compilediag_cmd() -> list[str]:
    exe = shutil.which("compilediag")
    return [exe] if exe else [sys.executable, "-m", "compilediag"]


def run_cli(
    *args: str, timeout: float = 300, cwd: Path | None = None, env: dict | None = None
) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k != "GITHUB_ACTIONS"}  # tests choose
    full = {**base, "NO_COLOR": "1", "COLUMNS": "100", **(env or {})}
    return subprocess.run(
        [*compilediag_cmd(), *args], capture_output=True, text=True, timeout=timeout,
        env=full, cwd=cwd or ROOT,
    )  # fmt: skip


def run_json(*args: str, **kw) -> tuple[dict, subprocess.CompletedProcess]:
    proc = run_cli(*args, "--format", "json", **kw)
    assert proc.stdout.strip(), proc.stderr
    return json.loads(proc.stdout), proc


@pytest.fixture
def samples() -> Path:
    return SAMPLES
