"""Bad input ends with the documented exit code and one short message, never our traceback."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.conftest import run_cli

MODEL_RAISES = """\
import torch
class M(torch.nn.Module):
    def forward(self, x):
        return x @ torch.randn(3, 3)
def get_inputs():
    return (torch.randn(2, 4),)
"""
HANGS = """\
import time, torch
class M(torch.nn.Module):
    def forward(self, x):
        time.sleep(1000)
        return x
def get_inputs():
    return (torch.randn(2, 4),)
"""
SEGFAULTS = """\
import os, signal, torch
class M(torch.nn.Module):
    def forward(self, x):
        os.kill(os.getpid(), signal.SIGSEGV)
        return x
def get_inputs():
    return (torch.randn(2, 4),)
"""
BROKEN_BACKEND = """\
import torch
from torch._dynamo import register_backend

@register_backend
def broken(gm, example_inputs):
    raise RuntimeError("this backend always fails")

class M(torch.nn.Module):
    def forward(self, x):
        return (x * 2).relu()

def get_inputs():
    return (torch.randn(2, 4),)
"""
CASES = {
    "missing file": (None, [], 2, "does not exist"),
    "syntax error": ("import torch\ndef get_model(:\n    pass\n", [], 3, "SyntaxError"),
    "no model": ("import torch\nx = 1\n", [], 2, "no model found"),
    "no inputs": ("import torch\nmodel = torch.nn.Linear(2, 2)\n", [], 2, "no inputs found"),
    "bad --input": (
        "import torch\nmodel = torch.nn.Linear(2, 2)\n",
        ["--input", "2xq"],
        2,
        "is not a shape",
    ),
    "bad dtype": (
        "import torch\nmodel = torch.nn.Linear(2, 2)\n",
        ["--input", "2x2:complex7"],
        2,
        "unknown dtype",
    ),
    "model raises in eager": (MODEL_RAISES, [], 3, "mat1 and mat2 shapes cannot be multiplied"),
    "unknown backend": (MODEL_RAISES, ["--backend", "nope"], 2, "unknown backend 'nope'"),
    "compile failure": (BROKEN_BACKEND, ["--backend", "broken"], 4, "this backend always fails"),
    "hang past --timeout": (HANGS, ["--timeout", "8"], 5, "did not finish within --timeout 8s"),
    "killed by a signal": (SEGFAULTS, [], 5, "killed by signal SIGSEGV"),
    "unknown format": ("x = 1\n", ["--format", "xml"], 2, "unknown --format"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input(case: str, tmp_path: Path) -> None:
    source, args, code, message = CASES[case]
    model = tmp_path / "model.py"
    if source is not None:
        model.write_text(source)
    proc = run_cli("explain", str(model), "--no-timings", *args, timeout=120)
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    text = proc.stderr if code != 4 else proc.stdout
    assert message in text
    assert "Traceback" not in proc.stderr
    if code in (2, 3, 5):
        assert proc.stdout == ""
        assert len(proc.stderr.strip().splitlines()) <= 12


def test_model_error_names_the_users_line(tmp_path: Path) -> None:
    model = tmp_path / "model.py"
    model.write_text(MODEL_RAISES)
    proc = run_cli("explain", str(model), "--no-timings")
    assert f"at {model}:4" in proc.stderr
    assert "return x @ torch.randn(3, 3)" in proc.stderr


def test_compile_failure_is_a_finding_in_the_report(tmp_path: Path) -> None:
    import json

    model = tmp_path / "model.py"
    model.write_text(textwrap.dedent(BROKEN_BACKEND))
    proc = run_cli("explain", str(model), "--no-timings", "--backend", "broken", "--format", "json")
    assert proc.returncode == 4
    report = json.loads(proc.stdout)
    assert report["errors"][0].startswith(f"torch.compile failed at {model}:")
    assert "RuntimeError: this backend always fails" in report["errors"][0]
