"""A live line on a terminal for each long phase of explain and fix (#53): the compile,
the timing blocks, each of fix's verification runs; piped, nothing: stderr then holds
what went wrong and nothing else."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import SAMPLES, compilediag_cmd, read_terminal, run_cli

# the whole suite's (`pytest --full`): end-to-end runs, tens of seconds each on 2 cores
pytestmark = pytest.mark.full


def on_a_terminal(args: list[str], cwd: Path) -> tuple[int, str, str]:
    """The command with stderr on a pseudo-terminal (stdout a pipe): its exit code,
    stdout, and all the terminal was sent."""
    import pty

    primary, secondary = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "GITHUB_ACTIONS")}
    proc = subprocess.Popen(
        [*compilediag_cmd(), *args], stdout=subprocess.PIPE, stderr=secondary,
        env={**env, "COLUMNS": "200"}, cwd=cwd,
    )  # fmt: skip
    os.close(secondary)
    seen = read_terminal(primary)
    out = proc.stdout.read().decode() if proc.stdout else ""
    proc.wait(timeout=600)
    return proc.returncode, out, seen


def _progress(stderr: str) -> list[str]:
    """What of `stderr` is progress (a live line, its escapes or carriage returns); a fact
    about the result stays (a machine too busy to time on, say)."""
    live = re.compile(r"\W*(compiling|running |verifying|timing |building the report)")
    return [
        line for line in stderr.splitlines(keepends=True)
        if "\x1b" in line or "\r" in line or live.match(line)
    ]  # fmt: skip


def test_explain_shows_the_compile_and_each_timing_block_on_a_terminal_and_nothing_piped(
    tmp_path: Path,
) -> None:
    args = ["explain", str(SAMPLES / "clean_mlp.py"), "--backend", "eager", "--format", "json"]
    code, out, tty = on_a_terminal(args, tmp_path)
    assert code == 0, tty
    assert '"schema_version"' in out
    assert "compiling and running call 1 with eager" in tty
    assert "timing eager vs compiled: block " in tty  # each block, as it goes
    assert "building the report" in tty
    piped = run_cli(*args, cwd=tmp_path)
    assert piped.returncode == 0
    assert not _progress(piped.stderr), piped.stderr  # no progress, no spinner's escapes


def test_fix_shows_each_verification_run_on_a_terminal_and_nothing_piped(tmp_path: Path) -> None:
    shutil.copy(SAMPLES / "item_break.py", tmp_path / "item_break.py")
    args = ["fix", "item_break.py", "--backend", "eager", "--repeat", "2", "--warmup", "1"]
    code, out, tty = on_a_terminal(args, tmp_path)
    assert code == 0, tty
    assert "GB0124 gone" in out
    assert "running item_break.py as explain does (seed 0): " in tty
    assert "verifying the patch at line 15 (item; run 1 of at most 1): compiling" in tty
    assert "line 15 (item): kept: GB0124 gone" in tty  # what the run found, kept above
    piped = run_cli(*args, cwd=tmp_path)
    assert piped.returncode == 0 and "GB0124 gone" in piped.stdout
    assert not _progress(piped.stderr), piped.stderr
