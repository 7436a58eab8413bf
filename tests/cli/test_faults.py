"""The fault table: every way a run can go wrong ends with its documented exit code and one
short message naming the problem and the fix - never our traceback, nothing lost.

FAULTS is the table docs/usage.md's "Faults" section prints row for row (a test checks the
two agree). Rows that can be caught before the model runs are checked to be caught then:
their model file writes a marker when imported, which must not appear.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from typer.testing import CliRunner

from compilediag.cli.app import app
from tests.conftest import (
    ROOT,
    compilediag_cmd,
    read_terminal,
    run_cli,
    sigint_as_a_terminal_has_it,
)

runner = CliRunner()

OK_MODEL = """\
import pathlib, torch
pathlib.Path(__file__).with_suffix(".imported").write_text("yes")
class M(torch.nn.Module):
    def forward(self, x):
        return (x * 2).relu()
def get_inputs():
    return (torch.randn(2, 4),)
"""
EAGER_FAILS = """\
import torch
class M(torch.nn.Module):
    def forward(self, x):
        return x @ torch.randn(3, 3)
def get_inputs():
    return (torch.randn(2, 4),)
"""
TAKES_INDICES = """\
import torch
class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 4)
    def forward(self, tokens):
        return self.emb(tokens)
def get_inputs():
    return (torch.randint(0, 10, (2, 4)),)
"""
CONSTRUCTOR_RAISES = """\
import torch
class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        raise ValueError("weights file missing")
    def forward(self, x):
        return x
def get_inputs():
    return (torch.randn(2, 4),)
"""
IMPORTS_MISSING = "import torch\nimport nosuchpackage_xyz.layers\nmodel = torch.nn.Linear(2, 2)\n"
# a training script given to explain (look 27: pytorch/examples' VAE read "the model failed
# without torch.compile: SystemExit: 2 ... This is a bug in the model or its inputs")
A_SCRIPT = """\
import argparse
import torch
parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=1)
args = parser.parse_args()
model = torch.nn.Linear(2, 2)
"""
# nanoGPT's configurator (look 28): it opens what its command line names, in the worker
# compilediag's own folder ("IsADirectoryError ... a bug in the model")
A_SCRIPT_READS_ARGV = """\
import sys
import torch
for arg in sys.argv[1:]:
    if not arg.startswith("--"):
        exec(open(arg).read())
model = torch.compile(torch.nn.Linear(2, 2))
"""
TWO_MODELS = """\
import torch
class A(torch.nn.Module):
    def forward(self, x):
        return x
class B(torch.nn.Module):
    def forward(self, x):
        return x
def get_inputs():
    return (torch.randn(2, 4),)
"""
DYNAMO_FAILS = """\
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
LOWERING_FAILS = """\
import torch
from torch._inductor import lowering

def refuse(*args, **kwargs):
    raise RuntimeError("no lowering for this op today")

lowering.lowerings[torch.ops.aten.relu.default] = refuse

class M(torch.nn.Module):
    def forward(self, x):
        return (x * 3).relu()
def get_inputs():
    return (torch.randn(2, 4),)
"""
OUTPUTS_DIFFER = """\
import torch
from torch._dynamo import register_backend

@register_backend
def off_by_one(gm, example_inputs):
    def run(*args):
        return [o + 1 for o in gm(*args)]
    return run

class M(torch.nn.Module):
    def forward(self, x):
        return (x * 2).relu()
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
NEEDS_ARGUMENTS = """\
import torch
class Net(torch.nn.Module):
    def __init__(self, vocab, dim, dropout=0.1):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, dim)
    def forward(self, x):
        return self.emb(x)
"""
SIGNALLED = """\
import os, signal, torch
class M(torch.nn.Module):
    def forward(self, x):
        os.kill(os.getpid(), signal.{sig})
        return x
def get_inputs():
    return (torch.randn(2, 4),)
"""


@dataclass
class Fault:
    source: str | None  # the model file's text; None: no file at all
    args: list[str]
    code: int
    message: str  # a phrase the message must hold
    fix: str = ""  # a phrase of the fix the message must name
    before_run: bool = False  # caught before the worker starts
    env: dict[str, str] = field(default_factory=dict)
    where: str = "stderr"


FAULTS: dict[str, Fault] = {
    "missing model file": Fault(None, [], 2, "does not exist", "Check the path", True),
    "a folder given as the model": Fault("<dir>", [], 2, "is a folder", "Pass a .py file", True),
    "syntax error in the model file": Fault(
        "import torch\ndef get_model(:\n    pass\n",
        [],
        2,
        "does not parse: line 2",
        "Fix the syntax",
        True,
    ),
    "the model file imports a missing package": Fault(
        IMPORTS_MISSING, [], 2, "imports `nosuchpackage_xyz`", "pip install nosuchpackage_xyz"
    ),
    "a training script that parses its command line when imported": Fault(
        A_SCRIPT,
        [],
        2,
        "exited as compilediag imported it (SystemExit: 2 at model.py:5 "
        "`args = parser.parse_args()`): it is a script that runs when imported, and its "
        "argument parser read compilediag's own command line",
        "compilediag run -- python",
    ),
    "a training script that fails when imported": Fault(
        A_SCRIPT_READS_ARGV,
        [],
        2,
        "raised as compilediag imported it (IsADirectoryError",
        "compilediag run -- python",
    ),
    "no model in the file": Fault("import torch\nx = 1\n", [], 2, "no model found", ":ATTR"),
    "several candidate models": Fault(TWO_MODELS, [], 2, "2 models in", "Name one, e.g."),
    "a model class that needs constructor arguments": Fault(
        NEEDS_ARGUMENTS, [], 2, "Net(vocab, dim) needs constructor arguments", "def get_model()"
    ),
    "the model's constructor raises": Fault(
        CONSTRUCTOR_RAISES, [], 3, "weights file missing", "eager mode first"
    ),
    "no inputs": Fault(
        "import torch\nmodel = torch.nn.Linear(2, 2)\n", [], 2, "no inputs found", "--input"
    ),
    "--input that does not fit the model": Fault(
        EAGER_FAILS,
        ["--input", "3x7"],
        2,
        "--input (3x7:float32) does not fit the model",
        "one --input for each tensor argument",
    ),
    "--input of a dtype the model does not take": Fault(
        TAKES_INDICES,
        ["--input", "2x4"],
        2,
        "'indices' to have one of the following scalar",
        "`--input 2x4:int64`",
    ),
    "get_inputs() that does not fit the model": Fault(
        EAGER_FAILS, [], 3, "mat1 and mat2 shapes cannot be multiplied", "eager mode first"
    ),
    "bad --input": Fault(OK_MODEL, ["--input", "2xq"], 2, "is not a shape", "e.g. 8x16", True),
    "bad --input dtype": Fault(
        OK_MODEL, ["--input", "2x2:complex7"], 2, "unknown dtype", "Known dtypes", True
    ),
    "bad --mode": Fault(
        OK_MODEL, ["--mode", "fastest"], 2, "unknown --mode", "reduce-overhead", True
    ),
    "bad --format": Fault(OK_MODEL, ["--format", "xml"], 2, "unknown --format", "json", True),
    # (click's own check, in the form of every other error: a look read click's four lines)
    "a negative --max-graph-breaks": Fault(
        OK_MODEL,
        ["--max-graph-breaks", "-1"],
        2,
        "error: Invalid value for '--max-graph-breaks'",
        "See `compilediag explain --help`",
        True,
    ),  # fmt: skip
    "bad [tool.compilediag] value": Fault(
        OK_MODEL, [], 2, "max_graph_breaks = 'zero'", "a whole number", True
    ),
    "unknown backend": Fault(
        OK_MODEL,
        ["--backend", "inductr"],
        2,
        "unknown backend 'inductr'",
        "Did you mean 'inductor'?",
    ),  # fmt: skip
    "--device cuda without a GPU": Fault(
        OK_MODEL, ["--device", "cuda"], 2, "sees no CUDA device", "--device cpu"
    ),
    "the model fails in eager mode": Fault(
        EAGER_FAILS, [], 3, "failed without torch.compile", "eager mode first"
    ),
    "torch.compile fails in Dynamo or the backend": Fault(
        DYNAMO_FAILS, ["--backend", "broken"], 4, "this backend always fails"
    ),
    "Inductor fails to lower an op": Fault(
        LOWERING_FAILS, ["--backend", "inductor"], 4, "no lowering for this op today", "aot_eager"
    ),
    "no C++ compiler for Inductor": Fault(
        OK_MODEL,
        ["--backend", "inductor"],
        4,
        "InvalidCxxCompiler",
        "install one",
        env={"CXX": "/nonexistent/g++"},
    ),  # fmt: skip
    # (--check-outputs: the rule's name before it judged against float64, still taken)
    "compiled outputs differ from eager (--fail-on-mismatch)": Fault(
        OUTPUTS_DIFFER,
        ["--backend", "off_by_one", "--check-outputs"],
        1,
        "FAIL fail-on-mismatch: outputs differ from eager",
        where="stdout",
    ),  # fmt: skip
    "hang past --timeout": Fault(
        HANGS,
        ["--timeout", "8"],
        5,
        "did not finish within --timeout 8s and was stopped while",  # (a call of the model's)
        "look for a loop or a wait in forward",
    ),
    "worker killed by a signal (a native crash)": Fault(
        SIGNALLED.format(sig="SIGSEGV"), [], 5, "killed by signal SIGSEGV", "eager crashes too"
    ),
    "worker killed (out of memory)": Fault(
        SIGNALLED.format(sig="SIGKILL"), [], 5, "killed by signal SIGKILL", "out-of-memory"
    ),
    "--output in a missing folder": Fault(
        OK_MODEL, ["--output", "<tmp>/nowhere/r.json"], 2, "does not exist", "Create it", True
    ),
    "--output that is a folder": Fault(
        OK_MODEL, ["--output", "<tmp>"], 2, "is a folder", "Name a file", True
    ),
    "--junit in a missing folder": Fault(
        OK_MODEL, ["--junit", "<tmp>/nowhere/j.xml"], 2, "does not exist", "Create it", True
    ),
    # (a look: 0 stopped the worker as it imported torch, printed its traceback, exit 5)
    "--timeout 0": Fault(
        OK_MODEL, ["--timeout", "0"], 2, "--timeout 0 is no time", "more than 0", True
    ),
    "--repeat 0": Fault(OK_MODEL, ["--repeat", "0"], 2, "'--repeat'", "", True),
    # (a look: the error named --html alone, and the next run failed on --junit)
    "--html and --junit both in missing folders": Fault(
        OK_MODEL,
        ["--html", "<tmp>/a/r.html", "--junit", "<tmp>/b/j.xml"],
        2,
        "r.html: folder <tmp>/a does not exist. --junit <tmp>/b/j.xml: folder <tmp>/b does",
        "Create it",
        True,
    ),  # fmt: skip
    # (a look: /proc/version/x.html read "folder /proc/version does not exist")
    "--html under a file (a path through it)": Fault(
        OK_MODEL,
        ["--html", "<tmp>/model.py/r.html"],
        2,
        "<tmp>/model.py is a file, not a folder",
        "Name a path in a folder",
        True,
    ),  # fmt: skip
}
# Rows checked by their own tests below (they need a signal, a full disk or a dump folder).
OWN_TESTS = {
    "Ctrl-C during the run": "test_ctrl_c_stops_the_worker_and_cleans_up",
    "Ctrl-C while gcc builds a kernel": "test_ctrl_c_during_a_cpp_compile_leaves_no_compiler_temp_files",
    "disk full while writing the report": "test_disk_full_leaves_no_half_written_file",
    "dump-kernels --out that is a file or not writable": "test_dump_out_checked_before_the_run",
}


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_fault(name: str, tmp_path: Path) -> None:
    f = FAULTS[name]
    if name == "--device cuda without a GPU":
        torch = pytest.importorskip("torch")
        if torch.cuda.is_available():
            pytest.skip("this machine has a GPU")
    model = tmp_path / "model.py"
    if f.source == "<dir>":
        model.mkdir()
    elif f.source is not None:
        model.write_text(f.source)
    if name == "bad [tool.compilediag] value":
        (tmp_path / "pyproject.toml").write_text('[tool.compilediag]\nmax_graph_breaks = "zero"\n')
    args = [a.replace("<tmp>", str(tmp_path)) for a in f.args]
    env = dict(f.env)
    if "CXX" in env:  # a private cache, so the C++ compiler is really called
        env["TORCHINDUCTOR_CACHE_DIR"] = str(tmp_path / "inductor-cache")
    proc = run_cli("explain", str(model), "--no-timings", *args, cwd=tmp_path, env=env, timeout=180)
    assert proc.returncode == f.code, (proc.stdout, proc.stderr)
    text = proc.stdout if f.where == "stdout" else proc.stderr
    said = " ".join(text.split())  # (wrapped to the terminal's width)
    assert f.message.replace("<tmp>", str(tmp_path)) in said, text
    assert f.fix in proc.stderr + proc.stdout
    assert "Traceback" not in proc.stderr
    if f.code in (2, 3, 5):
        assert proc.stdout == ""
        assert len(proc.stderr.strip().splitlines()) <= 12
    if f.code == 4:  # a finding in the report, and said on stderr too
        assert proc.stderr.startswith("error: torch.compile failed")
    if f.before_run:
        assert not model.with_suffix(".imported").exists(), "the model ran before the check"


@pytest.mark.full
def test_the_dtype_an_input_misfit_names_is_the_one_the_model_takes(tmp_path: Path) -> None:
    """The fix the float --input's refusal names, applied: the Embedding model runs."""
    model = tmp_path / "model.py"
    model.write_text(TAKES_INDICES)
    refused = run_cli("explain", str(model), "--no-timings", "--input", "2x4", cwd=tmp_path)
    (fix,) = re.findall(r"`--input (\S+)`", refused.stderr)
    proc = run_cli(
        "explain", str(model), "--no-timings", "--backend", "eager", "--input", fix, cwd=tmp_path
    )
    assert proc.returncode == 0 and "2x4:int64" in proc.stdout, proc.stderr


MAKES_DOUBLE = """\
import torch
class Sequence(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = torch.nn.LSTMCell(1, 8)
    def forward(self, x):
        h = torch.zeros(x.size(0), 8, dtype=torch.double)
        c = torch.zeros(x.size(0), 8, dtype=torch.double)
        for t in x.split(1, dim=1):
            h, c = self.cell(t, (h, c))
        return h
GET_MODEL
"""


@pytest.mark.full
def test_a_model_that_makes_its_own_dtype_is_given_get_model(tmp_path: Path) -> None:
    """Look 26 (pytorch/examples' time_sequence_prediction): its Sequence has float32
    weights and makes float64 states, and runs as `.double()` in train.py. `--input
    3x99:float64` read "Give the dtype the model takes after the shape", which no dtype
    satisfies; the words name the other dtype and get_model() with the model's dtype, and
    that, applied, runs."""
    model = tmp_path / "model.py"
    model.write_text(MAKES_DOUBLE.replace("GET_MODEL", ""))
    for dtype, other in (("float64", "float32"), ("float32", "float64")):
        refused = run_cli("explain", str(model), "--no-timings", "--input", f"3x5:{dtype}",
                          cwd=tmp_path)  # fmt: skip
        assert refused.returncode == 2, refused.stderr
        assert f"`--input 3x5:{other}`" in refused.stderr, refused.stderr
        assert "give get_model() the model in the dtype your program runs it in" in refused.stderr
    model.write_text(
        MAKES_DOUBLE.replace("GET_MODEL", "def get_model():\n    return Sequence().double()")
    )
    proc = run_cli("explain", str(model), "--no-timings", "--backend", "eager", "--input",
                   "3x5:float64", cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr


def test_readme_fault_table_lists_every_fault() -> None:
    usage = (ROOT / "docs" / "usage.md").read_text()
    section = usage.split("## Faults", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[1].isdigit():
            rows[cells[0]] = int(cells[1])
    expected = {name: f.code for name, f in FAULTS.items()}
    expected.update({"Ctrl-C during the run": 130, "disk full while writing the report": 2,
                     "dump-kernels --out that is a file or not writable": 2,
                     "Ctrl-C while gcc builds a kernel": 130})  # fmt: skip
    from tests.cli import test_messages, test_run  # `run`'s faults: with its other behaviour

    expected.update({name: code for name, (code, _) in test_run.RUN_FAULTS.items()})
    assert all(
        hasattr(test_run, test) or hasattr(test_messages, test)
        for _, test in test_run.RUN_FAULTS.values()
    )
    assert set(OWN_TESTS) <= set(rows) and all(name in globals() for name in OWN_TESTS.values())
    assert rows == expected


def test_unreadable_model_file_is_refused_before_the_run(tmp_path: Path, monkeypatch) -> None:
    model = tmp_path / "model.py"
    model.write_text(OK_MODEL)
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, m: False if str(p) == str(model) else real(p, m))
    result = runner.invoke(app, ["explain", str(model)])
    assert result.exit_code == 2 and "cannot be read" in result.output


def test_model_error_names_the_users_line(tmp_path: Path) -> None:
    model = tmp_path / "model.py"
    model.write_text(EAGER_FAILS)
    proc = run_cli("explain", str(model), "--no-timings")
    assert f"at {model}:4" in proc.stderr
    assert "return x @ torch.randn(3, 3)" in proc.stderr


def test_compile_failure_is_a_finding_in_the_report(tmp_path: Path) -> None:
    model = tmp_path / "model.py"
    model.write_text(DYNAMO_FAILS)
    proc = run_cli("explain", str(model), "--no-timings", "--backend", "broken", "--format", "json")
    assert proc.returncode == 4
    report = json.loads(proc.stdout)
    (err,) = report["errors"]
    assert err["kind"] == "compile_failed" and err["severity"] == "error"
    assert err["message"].startswith(f"torch.compile failed at {model}:")
    assert "RuntimeError: this backend always fails" in err["message"]


@pytest.mark.parametrize(
    ("signum", "code", "said"),
    [(signal.SIGINT, 130, "interrupted."), (signal.SIGTERM, 143, "terminated (SIGTERM).")],
    ids=["ctrl-c", "sigterm"],
)
def test_ctrl_c_stops_the_worker_and_cleans_up(
    tmp_path: Path, signum: int, code: int, said: str
) -> None:
    """Ctrl-C, and SIGTERM as a CI job's cancel sends it (a nineteenth look: compilediag
    ended, its worker ran on 10 minutes with its folder), stop the worker and clean up."""
    model = tmp_path / "model.py"
    model.write_text(HANGS)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "NO_COLOR": "1"}
    env.pop("GITHUB_ACTIONS", None)
    proc = subprocess.Popen(
        [*compilediag_cmd(), "explain", str(model), "--no-timings"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
        preexec_fn=sigint_as_a_terminal_has_it,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    status = None
    while time.monotonic() < deadline:  # wait until the worker is running the model
        status = next(tmp.glob("compilediag-*/status"), None)
        if status and "running eager" in status.read_text():
            break
        time.sleep(0.2)
    assert status is not None, "the worker never started"
    worker_pids = _children(proc.pid)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err
    assert err.strip() == said
    assert out == ""
    assert not list(tmp.glob("compilediag-*"))  # our temp folder removed (torch's cache stays)
    time.sleep(0.2)
    for pid in worker_pids:
        assert not _alive(pid), f"worker {pid} still running"


COMPILERS = {"cc1plus", "cc1", "as", "g++", "gcc", "c++", "ld", "collect2"}


def _descendants(pid: int) -> dict[int, str]:
    """Every process below `pid`: pid -> command name."""
    out = subprocess.run(["ps", "-eo", "pid=,ppid=,comm="], capture_output=True, text=True)
    rows = [line.split(None, 2) for line in out.stdout.splitlines()]
    parent = {int(p): int(pp) for p, pp, _ in rows}
    names = {int(p): name for p, _, name in rows}
    found = {}
    for child in parent:
        up = parent.get(child)
        while up and up != pid:
            up = parent.get(up)
        if up == pid:
            found[child] = names[child]
    return found


@pytest.mark.slow
def test_ctrl_c_during_a_cpp_compile_leaves_no_compiler_temp_files(tmp_path: Path) -> None:
    """Interrupted while gcc builds an Inductor kernel: the user's temp folder (where gcc
    writes its cc*.s, as in their own run) holds no compiler temp files and none of ours
    afterwards; torch's cache is where torch keeps it."""
    model = tmp_path / "model.py"
    model.write_text(OK_MODEL)
    tmp = tmp_path / "tmp"
    tmp.mkdir()  # an empty temp folder: a cold Inductor cache, so gcc runs
    env = {**os.environ, "TMPDIR": str(tmp), "NO_COLOR": "1"}
    env.pop("GITHUB_ACTIONS", None)
    proc = subprocess.Popen(
        [*compilediag_cmd(), "explain", str(model), "--no-timings", "--device", "cpu"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
        preexec_fn=sigint_as_a_terminal_has_it,
    )  # fmt: skip
    deadline = time.monotonic() + 240
    compiling: dict[int, str] = {}
    while time.monotonic() < deadline and proc.poll() is None and not compiling:
        compiling = {p: n for p, n in _descendants(proc.pid).items() if n in COMPILERS}
        time.sleep(0.05)
    assert compiling, "gcc never ran (a warm cache?)"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    time.sleep(0.3)
    left = [p.name for p in tmp.iterdir() if not p.name.startswith("torchinductor_")]
    assert left == [], left
    assert not [p for p in tmp.rglob("cc*") if p.is_file() and p.suffix in (".s", ".o", ".c")]


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


def test_disk_full_leaves_no_half_written_file(tmp_path: Path, monkeypatch) -> None:
    from compilediag import fsutil
    from compilediag.errors import UsageError

    target = tmp_path / "report.json"
    target.write_text("the previous report\n")

    def full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(fsutil.os, "fsync", full)
    with pytest.raises(UsageError, match="No space left on device"):
        fsutil.write_output_file(str(target), "x" * 10_000, "--output")
    assert target.read_text() == "the previous report\n"
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]  # no temp file left


def test_dump_out_checked_before_the_run(tmp_path: Path) -> None:
    model = tmp_path / "model.py"
    model.write_text(OK_MODEL)
    a_file = tmp_path / "kernels"
    a_file.write_text("not a folder")
    result = runner.invoke(app, ["dump-kernels", str(model), "--out", str(a_file)])
    assert result.exit_code == 2 and "is a file" in result.output
    assert not model.with_suffix(".imported").exists()


def test_files_are_written_with_the_umask_rights(tmp_path: Path) -> None:
    from compilediag.fsutil import public_dir, write_atomic

    old = os.umask(0o022)
    try:
        write_atomic(tmp_path / "r.json", "{}")
        folder = Path(__import__("tempfile").mkdtemp(dir=tmp_path))
        public_dir(folder)
    finally:
        os.umask(old)
    assert (tmp_path / "r.json").stat().st_mode & 0o777 == 0o644
    assert folder.stat().st_mode & 0o777 == 0o755


def test_report_on_an_empty_folder_names_it(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = runner.invoke(app, ["report", str(empty)])
    assert result.exit_code == 2
    assert f"TORCH_TRACE={empty}" in result.output and "{path}" not in result.output


def test_config_value_of_the_wrong_type_is_a_usage_error(tmp_path: Path, monkeypatch) -> None:
    from compilediag.cli.config import _KINDS, load_config
    from compilediag.cli.options import RUN_CONFIG_KEYS
    from compilediag.errors import UsageError
    from compilediag.gate import GATE_RULES

    # every key has a type: each run option's and each gate rule's, as declared
    gate = {r.key for r in GATE_RULES}
    assert set(_KINDS) == set(RUN_CONFIG_KEYS) | {"shapes", "baseline"} | gate
    assert {"model", "inputs", "backend", "device", "mode"} <= set(RUN_CONFIG_KEYS)
    for key, value in (("min_speedup", '"fast"'), ("fullgraph", '"yes"'), ("inputs", "[8]"),
                       ("max_recompiles", "true"), ("fail_on_divergence", "1")):  # fmt: skip
        (tmp_path / "pyproject.toml").write_text(f"[tool.compilediag]\n{key} = {value}\n")
        with pytest.raises(UsageError, match=re.escape(key)):
            load_config(tmp_path)


def test_progress_is_shown_on_a_terminal_whatever_the_format(tmp_path: Path) -> None:
    """`--format json > baseline.json` in a terminal: stderr shows the stage and the time."""
    import pty

    model = tmp_path / "model.py"
    model.write_text(OK_MODEL)
    out = tmp_path / "out.json"
    primary, secondary = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "GITHUB_ACTIONS")}
    with open(out, "w") as stdout:
        proc = subprocess.Popen(
            [*compilediag_cmd(), "explain", str(model), "--backend", "eager", "--no-timings",
             "--format", "json"],
            stdout=stdout, stderr=secondary, env={**env, "COLUMNS": "100"}, cwd=tmp_path,
        )  # fmt: skip
        os.close(secondary)
        text = read_terminal(primary)
        proc.wait(timeout=120)
    assert proc.returncode == 0
    assert json.loads(out.read_text())["summary"]["graphs"] == 1
    assert "compiling and running call 1 with eager" in text
    assert re.search(r"0:00:\d\d", text), text  # elapsed time
    assert "done ..." not in text


def test_assert_compiles_failure_carries_no_empty_trace_lines(caplog) -> None:
    import torch

    from compilediag.testing import assert_compiles

    class Prints(torch.nn.Module):
        def forward(self, x):
            x = x + 1
            print("hi")
            return x * 2

    with pytest.raises(AssertionError, match="budget exceeded"):
        assert_compiles(Prints(), (torch.randn(2),))
    assert not [r for r in caplog.records if r.name == "torch.__trace"]


def test_saved_report_holds_no_path_of_this_machine(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    model = tmp_path / "models" / "net.py"
    model.write_text(
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
        "        x = x + 1\n        print('hi')\n        return x * 2\n"
        "def get_inputs():\n    return (torch.randn(2, 4),)\n"
    )
    proc = run_cli("explain", "models/net.py", "--backend", "eager", "--no-timings",
                   "--format", "json", cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert str(tmp_path) not in proc.stdout and sys.prefix not in proc.stdout
    report = json.loads(proc.stdout)
    assert report["target"]["path"] == "models/net.py"
    assert [(b["file"], b["line"]) for b in report["graph_breaks"]] == [("models/net.py", 5)]


HELPER_FAILS = """\
import numpy as np


def robust_scale(t):
    q = np.percentile(t.detach().cpu().numpy(), 90)
    return t / float(q + 1e-6)
"""
LOOP_THEN_HELPER = """\
import torch
from vendorlib.stats import robust_scale


class Net(torch.nn.Module):
    def forward(self, x):
        out = torch.zeros_like(x)
        for col in range(2):
            idx = torch.nonzero(x[:, col] > 0).squeeze(-1)
            out[idx] += 1
        return robust_scale(out + x)


def get_inputs():
    return (torch.randn(8, 4),)
"""


def test_a_compile_failure_in_a_helper_file_is_said_at_its_line(tmp_path: Path) -> None:
    """A twelfth look: "torch.compile failed at model.py:21", the line of a nonzero break in a
    loop (a frame torch skipped, no failure), where torch's own traceback ends in the user's
    vendored helper (vendorlib/stats.py:8, NumPy under compile). The failure is said where
    torch's traceback puts it, with the model's line that called it."""
    (tmp_path / "vendorlib").mkdir()
    (tmp_path / "vendorlib" / "__init__.py").write_text("")
    (tmp_path / "vendorlib" / "stats.py").write_text(HELPER_FAILS)
    (tmp_path / "model.py").write_text(LOOP_THEN_HELPER)
    proc = run_cli("explain", "model.py", "--backend", "eager", "--no-timings", "--format",
                   "json", cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 4, proc.stderr
    (err,) = json.loads(proc.stdout)["errors"]
    assert err["message"].startswith(
        "torch.compile failed at vendorlib/stats.py:6 (called from model.py:11): "
    ), err
    # torch's own: plain torch.compile raises there, and the model runs in eager mode
    code = (
        "import sys, traceback, torch; sys.path.insert(0, '.'); import model\n"
        "x = model.get_inputs()[0]; model.Net()(x)\n"
        "try:\n    torch.compile(model.Net(), backend='eager')(x)\n"
        "except Exception as e:\n"
        "    f = traceback.extract_tb(e.__traceback__)[-1]; print(f.filename, f.lineno)\n"
    )
    torch_says = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                                text=True, timeout=300)  # fmt: skip
    assert torch_says.stdout.split() == [str(tmp_path / "vendorlib" / "stats.py"), "6"], (
        torch_says.stdout + torch_says.stderr
    )


def _exit_with_sigterms_handler() -> None:
    os._exit(0 if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL else 3)


def test_a_forked_child_ends_on_sigterm_as_without_the_handler() -> None:
    """The CLI's SIGTERM handler is its own process's: a child forked under it (`report`'s
    rank-folding pool, which its pool ends with SIGTERM) takes the signal's default end
    from its start. With the handler inherited, a worker that the signal reached just
    before it blocked on its queue's lock slept there and its pool joined it for ever (1
    run in 6 of a 1024-rank report; a CI run's `run` of 2 ranks, 3 times). The handler is
    the parent's again after the command."""
    import multiprocessing

    from compilediag.cli.handled import handled

    fork = multiprocessing.get_context("fork")
    kept = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    with handled():
        assert signal.getsignal(signal.SIGTERM) is not kept[signal.SIGTERM]
        inherited = fork.Process(target=_exit_with_sigterms_handler)
        inherited.start()
        inherited.join(30)
        ended = fork.Process(target=time.sleep, args=(30,))
        ended.start()
        time.sleep(0.2)
        ended.terminate()
        ended.join(10)
    assert inherited.exitcode == 0, "the child kept the CLI's SIGTERM handler"
    assert ended.exitcode == -signal.SIGTERM, ended.exitcode
    assert {s: signal.getsignal(s) for s in kept} == kept
