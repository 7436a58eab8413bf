"""The package type-checks (mypy, settings in pyproject.toml): the typed pipeline - trace
records, worker spec and result, Report - is held to its types by a checker, not by hand."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT


def test_mypy_passes_on_the_package() -> None:
    pytest.importorskip("mypy")
    # mypy's cache outside the checkout: a fresh clone (CI) checks incrementally, 20 s less
    # on 2 cores (mypy re-checks whatever changed, by content)
    cache = Path.home() / ".cache" / "compilediag-tests" / "mypy"
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", "--cache-dir", str(cache)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
