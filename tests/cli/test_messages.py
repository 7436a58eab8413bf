"""What a user is told when the first thing they try does not fit compilediag's shape: a
job whose Python has no torch, a script that does not exist, a model file without
get_model(), a training script given to explain, and the help that says where to start.
Each through the real CLI: one short message that names the fix, never a traceback."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_cli, run_json


def _python_without_torch() -> list[str]:
    """An interpreter (and its flags) that cannot import torch: the system's Python,
    isolated from the user's site and PYTHONPATH, else this one without any site-packages."""
    for argv in (["/usr/bin/python3", "-I"], [sys.executable, "-I", "-S"]):
        if not Path(argv[0]).exists():
            continue
        probe = subprocess.run([*argv, "-c", "import torch"], capture_output=True)
        if probe.returncode != 0:
            return argv
    pytest.skip("no Python without torch on this machine")


def _fake_python(tmp_path: Path) -> tuple[Path, str]:
    """A folder holding `python`, a script that runs a Python without torch, and that
    Python's sys.executable."""
    argv = _python_without_torch()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = bin_dir / "python"
    python.write_text(f'#!/bin/sh\nexec {" ".join(argv)} "$@"\n')
    python.chmod(0o755)
    real = subprocess.run(
        [str(python), "-c", "import sys; print(sys.executable)"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    return bin_dir, real


# --- run: the job's Python has no torch -------------------------------------------------


def test_run_a_job_whose_python_has_no_torch_says_so(tmp_path: Path) -> None:
    bin_dir, real = _fake_python(tmp_path)
    (tmp_path / "train.py").write_text("import torch\nprint(torch.__version__)\n")
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    proc = run_cli("run", "--", "python", "train.py", cwd=tmp_path, env=env)
    assert proc.returncode == 6, proc.stderr
    err = proc.stderr
    assert "No module named 'torch'" in err  # the job's own output passes through
    last = err[err.index("error: ") :]
    assert "`python train.py` failed before compiling anything" in last, err
    assert f"its Python ({real}) has no torch" in last, err
    assert "install torch" in last and "Check that it calls torch.compile" not in last
    assert "Traceback" not in last


def test_run_a_job_whose_python_has_torch_is_not_told_it_has_none() -> None:
    failed = run_cli("run", "--", sys.executable, "-c", "raise SystemExit(7)")
    assert failed.returncode == 6
    assert "failed (exited with status 7) before it called torch.compile" in failed.stderr
    assert "has no torch" not in failed.stderr


# --- run: the script does not exist -----------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["missing.py"],
        ["-u", "missing.py", "--epochs", "1"],
        ["-X", "dev", "-W", "ignore", "missing.py"],
    ],
)
def test_run_a_missing_script_is_refused_before_anything_runs(
    tmp_path: Path, args: list[str]
) -> None:
    proc = run_cli("run", "--", sys.executable, *args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: the script missing.py does not exist"), proc.stderr
    assert "compilediag: running" not in proc.stderr, "the job ran"
    assert "Check that it calls torch.compile" not in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("args", [["-c", "raise SystemExit(0)"], ["-m", "json.tool", "--help"]])
def test_run_python_dash_c_and_dash_m_are_not_taken_for_a_script(args: list[str]) -> None:
    """`python -m MODULE` and `python -c CODE` name no script file: they run."""
    proc = run_cli("run", "--", sys.executable, *args)
    assert "does not exist" not in proc.stderr and "compilediag: running" in proc.stderr


# --- explain: the model built from a class with its defaults -------------------------------

FACTORY_MODEL = """\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, width=8, classes=4):
        super().__init__()
        self.fc = nn.Linear(width, classes)

    def forward(self, x):
        return self.fc(x).relu()


def make_model():
    return Net(8, 3)


def get_inputs():
    return (torch.randn(2, 8),)
"""


def test_a_model_built_with_its_defaults_is_said_with_the_files_factories(tmp_path: Path) -> None:
    model = tmp_path / "model.py"
    model.write_text(FACTORY_MODEL)
    report, proc = run_json("explain", str(model), "--backend", "eager", "--no-timings")
    assert proc.returncode == 0, proc.stderr
    (note,) = [n for n in report["notes"] if n["kind"] == "model_defaults"]
    assert note["message"].startswith("compilediag built Net() with its defaults"), note
    assert "make_model()" in note["message"]
    assert "get_model()" in note["fix"] and "model.py:make_model" in note["fix"]
    assert (note["file"].endswith("model.py"), note["line"]) == (True, 5)
    # the table shows it
    saved = tmp_path / "report.json"
    saved.write_text(json.dumps(report))
    table = run_cli("render", str(saved)).stdout
    assert "! compilediag built Net() with its defaults" in " ".join(table.split())


@pytest.mark.parametrize(
    "source",
    [
        FACTORY_MODEL.replace("def make_model", "def get_model"),  # the file chose
        # a class with nothing to choose, and no factory: the model as written
        FACTORY_MODEL.replace("width=8, classes=4", "")
        .replace("nn.Linear(width, classes)", "nn.Linear(8, 4)")
        .replace("def make_model():\n    return Net(8, 3)\n", ""),
    ],
)
def test_no_note_where_the_file_chose_its_model(tmp_path: Path, source: str) -> None:
    model = tmp_path / "model.py"
    model.write_text(source)
    report, proc = run_json("explain", str(model), "--backend", "eager", "--no-timings")
    assert proc.returncode == 0, proc.stderr
    assert not [n for n in report["notes"] if n["kind"] == "model_defaults"], report["notes"]


# --- explain on a training script ----------------------------------------------------------

TRAIN_SCRIPT = """\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return self.fc(x)


def main():
    model = torch.compile(Net())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        loss = model(torch.randn(2, 8)).sum()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
"""


def test_explain_on_a_training_script_points_to_run(tmp_path: Path) -> None:
    script = tmp_path / "train_net.py"
    script.write_text(TRAIN_SCRIPT)
    proc = run_cli("explain", "train_net.py", "--backend", "eager", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "no inputs found" in proc.stderr
    assert "compilediag run -- python train_net.py" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_explain_on_a_model_file_without_inputs_does_not_mention_run(tmp_path: Path) -> None:
    model = tmp_path / "model.py"
    model.write_text(TRAIN_SCRIPT.split("def main")[0])
    proc = run_cli("explain", str(model), "--backend", "eager")
    assert proc.returncode == 2 and "no inputs found" in proc.stderr
    assert "compilediag run" not in proc.stderr


# --- help ------------------------------------------------------------------------------------


def _commands(text: str) -> dict[str, str]:
    section = text.split("Commands:", 1)[1]
    rows = [re.match(r"  (\S+)\s+(.*)", line) for line in section.splitlines()]
    return {m[1]: m[2] for m in rows if m}


@pytest.mark.parametrize("columns", ["80", "100"])
def test_top_level_help_says_where_to_start_and_cuts_no_command(columns: str) -> None:
    proc = run_cli("--help", env={"COLUMNS": columns})
    assert proc.returncode == 0
    text = proc.stdout
    commands = _commands(text)
    assert set(commands) == {
        "explain",
        "recompiles",
        "report",
        "run",
        "dump-kernels",
        "render",
        "diff",
        "fix",
    }
    for name, short in commands.items():
        assert not short.endswith(("...", "…")), (name, short)
        assert short.endswith("."), (name, short)
    start = text.split("Commands:")[0]
    assert "Start here" in start
    assert "compilediag explain model.py" in start
    assert "compilediag run -- python train.py" in start
    assert max(len(line) for line in text.splitlines()) <= int(columns)


def test_explain_help_says_what_the_model_file_provides() -> None:
    text = " ".join(run_cli("explain", "--help", env={"COLUMNS": "80"}).stdout.split())
    assert "get_model()" in text and "get_inputs()" in text
    assert "--input" in text  # what to do without get_inputs()
    assert "compilediag run -- python train.py" in text  # a script is run, not explained


# --- recompiles: a shape left out of --shapes -------------------------------------------------


@pytest.mark.parametrize(
    ("shapes", "said"),
    [
        ("8x16,,16x16", "--shapes '8x16,,16x16': shape 2 of 3 is empty"),
        ("8x16,16x16,", "--shapes '8x16,16x16,': shape 3 of 3 is empty"),
    ],
)
def test_an_empty_shape_in_shapes_is_one_line_naming_it_and_the_fix(shapes: str, said: str) -> None:
    """Before: the empty entry was skipped, and the sweep ran without the shape the user
    meant to give."""
    proc = run_cli("recompiles", "sample_models/clean_mlp.py", "--shapes", shapes)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"error: {said}: remove the extra comma or put a shape there"), line
    assert line.endswith("(8x16,16x16)") and "Traceback" not in proc.stderr


def test_an_empty_shape_beside_a_bad_one_names_the_bad_one_not_a_fix_that_fails() -> None:
    """A look: `2x16,,4x` was offered "(2x16,4x)", which failed next on '4x'."""
    proc = run_cli("recompiles", "sample_models/clean_mlp.py", "--shapes", "2x16,,4x")
    assert proc.returncode == 2, proc.stderr
    assert "'4x' is not a shape" in proc.stderr and "(2x16,4x)" not in proc.stderr


# --- run: a --profile-steps window past the job's end -----------------------------------------

SGD_JOB = """\
import torch
from torch import nn

model = torch.compile(nn.Linear(8, 4), backend="eager")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(4):
    model(torch.randn(2, 8)).sum().backward()
    opt.step()
    opt.zero_grad()
"""


def test_a_window_past_the_jobs_end_is_a_warning_naming_its_steps(tmp_path: Path) -> None:
    """Before: exit 0, and only the report's Job section said the window was not measured."""
    (tmp_path / "job.py").write_text(SGD_JOB)
    proc = run_cli("run", "--profile-steps", "50-60", "--", sys.executable, "job.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last == (
        "compilediag: warning: --profile-steps 50-60 timed nothing: the job made 4 steps of "
        "SGD, so step 50 never came; profile steps within them, e.g. --profile-steps 2-4"
    ), proc.stderr
    reached = run_cli("run", "--profile-steps", "2-3", "--", sys.executable, "job.py", cwd=tmp_path)
    assert reached.returncode == 0 and "warning" not in reached.stderr, reached.stderr


def test_profile_steps_help_and_error_say_what_a_step_is_in_one_wording() -> None:
    """Before: the help said optimizer steps, the error 'calls of the job's first compiled
    frame'."""
    from compilediag.cli.options import STEPS_ARE

    words = "the job's optimizer steps; without one, calls of the first compiled model or function"
    assert STEPS_ARE == words
    help_text = " ".join(run_cli("run", "--help").stdout.split())
    assert f"Time steps A to B ({words})" in help_text
    for bad in ("7-3", "x-y", "0-2"):
        proc = run_cli("run", "--profile-steps", bad, "--", "python", "x.py")
        assert proc.returncode == 2, proc.stderr
        (line,) = proc.stderr.strip().splitlines()
        assert line == (
            f"error: --profile-steps {bad} is not a range of steps A-B, 1 <= A <= B: e.g. "
            f"--profile-steps 3-7 ({words})."
        ), line
        assert "first compiled frame" not in line


def test_a_long_line_on_stderr_fits_the_terminal_and_stays_whole_in_a_pipe(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--try-fixes' plan ran to 554 columns on a new user's terminal (two looks read it):
    on a terminal, a line is wrapped to its width at spaces, the next lines indented, a
    path kept whole; piped, each stays one line for grep and a log."""
    from compilediag.cli.progress import say

    words = "compilediag: --try-fixes: " + " ".join(["a remedy, alternated,"] * 20)
    path = "/tmp/compilediag-caches-abcdef/inductor/some/long/path/kernel.so"
    say(f"{words} {path}")
    assert capsys.readouterr().err == f"{words} {path}\n"
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    monkeypatch.setenv("COLUMNS", "80")
    say(f"{words} {path}")
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) > 5 and all(len(x) <= 80 for x in lines), lines
    assert all(x.startswith("  ") for x in lines[1:]) and lines[-1].strip() == path
    assert " ".join(x.strip() for x in lines) == f"{words} {path}"


def test_an_option_of_another_command_is_named_with_its_command() -> None:
    """A twenty-second look: `explain --budget` read only "No such option"; the option is
    `run`'s (with --try-fixes)."""
    proc = run_cli("explain", "sample_models/graph_breaks.py", "--budget", "30", as_typed=True)
    assert proc.returncode == 2
    assert "--budget is an option of `compilediag run`." in proc.stderr, proc.stderr
    proc = run_cli("explain", "sample_models/graph_breaks.py", "--frobnicate", as_typed=True)
    assert proc.returncode == 2 and "is an option of" not in proc.stderr, proc.stderr
