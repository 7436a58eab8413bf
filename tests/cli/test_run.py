"""`compilediag run -- COMMAND`: real jobs run through it, each checked against the counts
torch took inside the job itself (tests/fixtures/run_jobs/): a training loop with a graph
break and a recompile, a job that fails after compiling, one interrupted with SIGINT, a
2-rank torchrun job whose ranks diverge, a transformers model trained for a few steps, a
user's own sitecustomize, and a command that never imports torch."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import (
    ROOT,
    compilediag_cmd,
    compilediag_files,
    run_cli,
    run_torchrun,
    sigint_as_a_terminal_has_it,
)

# the whole suite's (`pytest --full`): end-to-end runs, minutes on 2 cores (docs/tests.md)
pytestmark = pytest.mark.full

JOBS = ROOT / "tests" / "fixtures" / "run_jobs"
TRAIN = JOBS / "train_loop.py"
BREAK_LINE = next(
    i for i, line in enumerate(TRAIN.read_text().splitlines(), 1) if "if h.sum() > 0" in line
)


# docs/usage.md's fault table, `run`'s rows: the exit code, and the test that shows it
# (here, or in tests/cli/test_messages.py)
RUN_FAULTS = {
    "run: no command after `--`": (2, "test_bad_input_is_refused_before_the_job_runs"),
    "run: a command that is not found": (2, "test_bad_input_is_refused_before_the_job_runs"),
    "run: `python SCRIPT` where SCRIPT does not exist": (
        2, "test_run_a_missing_script_is_refused_before_anything_runs",
    ),
    "run: bad --profile-steps": (2, "test_bad_input_is_refused_before_the_job_runs"),
    "run: --trace-dir that is not empty": (2, "test_a_kept_trace_folder_must_be_new_or_empty"),
    "run: the command compiled nothing": (2, "test_a_command_that_never_compiles"),
    "run: the command failed and compiled nothing": (6, "test_a_command_that_never_compiles"),
    "run: the command's Python has no torch": (
        6, "test_run_a_job_whose_python_has_no_torch_says_so",
    ),
    "run: the command exits non-zero after compiling": (
        6, "test_a_failed_job_is_reported_with_its_own_exit_code",
    ),
    "run: Ctrl-C while the job runs": (
        130, "test_ctrl_c_stops_the_job_and_reports_what_it_compiled",
    ),
}  # fmt: skip


def run_job(
    tmp_path: Path, *args: str, env: dict | None = None, timeout: float = 300
) -> tuple[dict | None, subprocess.CompletedProcess, dict]:
    """`compilediag run --format json ARGS`; the report, the process, and the job's own
    facts ($JOB_FACTS)."""
    facts = tmp_path / "facts.json"
    proc = run_cli(
        "run", "--format", "json", *args, env={"JOB_FACTS": str(facts), **(env or {})},
        timeout=timeout,
    )  # fmt: skip
    report = json.loads(proc.stdout) if proc.stdout.strip() else None
    return report, proc, json.loads(facts.read_text()) if facts.exists() else {}


def graph(report: dict, cid: str) -> dict:
    return next(g for g in report["graphs"] if g["compile_id"] == cid)


def test_a_training_loop_as_torch_counted_it(tmp_path: Path) -> None:
    report, proc, torch_saw = run_job(
        tmp_path,
        "--profile-steps",
        "3-7",
        "--",
        sys.executable,
        str(TRAIN),
        env={"JOB_WIDTH": "1024"},  # a step of about a ms: 15% is more than a busy CPU's noise
    )
    assert proc.returncode == 0, proc.stderr
    # the job's own stdout went to stderr: stdout is the JSON report alone
    assert "trained 12 steps" in proc.stderr
    s = report["summary"]
    assert s["graphs"] == torch_saw["frames"]
    assert s["recompiles"] == torch_saw["recompiles"] == 2
    assert s["graph_breaks"] == torch_saw["graph_breaks"]
    (b,) = report["graph_breaks"]
    assert (Path(b["file"]).name, b["line"]) == ("train_loop.py", BREAK_LINE)
    # calls: each graph ran as often as the job called the model with its shape
    sizes = torch_saw["calls"]
    assert graph(report, "0/0")["calls"] == graph(report, "1/0")["calls"] == sizes.count(8)
    assert graph(report, "0/1")["calls"] == graph(report, "1/1")["calls"] == sizes.count(5)
    r = report["runtime"]
    assert r["exit_code"] == 0 and r["processes"] == 1 and not r["interrupted"]
    assert r["steps"] == len(sizes) and r["step_frame"] == "forward"
    # (a step a loaded machine stalled is left out, and said: window_stalled)
    assert r["window"] == [3, 7] and r["window_steps"] + len(r["window_stalled"]) == 5
    # the window's step: its parts add up to it, and it is the step the job timed itself
    bd = report["timings"]["breakdown"]
    assert bd["calls"] == r["window_steps"]
    parts = ("in_graphs_ms", "between_graphs_ms", "in_call_ms", "backward_ms", "optimizer_ms",
             "data_ms", "outside_ms")  # fmt: skip
    assert sum(bd[p] for p in parts) == pytest.approx(bd["call_ms"], abs=1e-5)
    assert bd["backward_ms"] > 0 and bd["optimizer_ms"] > 0 and bd["data_ms"] == 0
    # the report's median step (a mean moves with one slow step) against the job's own steps
    # 3-6: its step 7 also holds the start of torch.profiler, which records the kernels of
    # the steps after the window, after the window's step 7 ended. Within 15% of the job's
    # median on a quiet machine; beside another test on two cores the job's four steps
    # spread (the report's median read 0.277 ms against the job's 0.339 in a 2.15 suite),
    # so the report's median must lie among them: from 15% under the fastest to 15% over
    # the slowest (a step counted twice or half a step would not).
    own = torch_saw["step_ms"][2:6]
    assert min(own) * 0.85 <= r["step_medians"]["step"] <= max(own) * 1.15, own
    # the break's cost is the eager Python after the graph it ended
    assert b["time_lost_ms"] == pytest.approx(graph(report, "0/0")["eager_ms"])
    assert 0 < b["time_lost_ms"] < bd["call_ms"]


def test_without_a_window_calls_are_counted_and_nothing_is_timed(tmp_path: Path) -> None:
    """The default: no profiling window, and the report says how to get one."""
    table = run_cli("run", "--", sys.executable, str(TRAIN))
    assert table.returncode == 0, table.stderr
    assert "trained 12 steps" in table.stdout  # a table: the job's output stays on stdout
    assert "not timed: pass --profile-steps A-B" in table.stdout
    assert "12 steps of SGD; the model: the compiled forward" in table.stdout


def test_a_failed_job_is_reported_with_its_own_exit_code(tmp_path: Path) -> None:
    report, proc, torch_saw = run_job(
        tmp_path, "--", sys.executable, str(TRAIN), env={"JOB_EXIT": "3"}
    )
    assert proc.returncode == 6, proc.stderr
    assert report["runtime"]["exit_code"] == 3
    assert report["summary"]["graphs"] == torch_saw["frames"]
    assert "the command exited with status 3" in proc.stderr.splitlines()[-1]


def _processes_with(marker: str) -> list[int]:
    found = []
    for p in Path("/proc").iterdir():
        try:
            if p.name.isdigit() and marker.encode() in (p / "cmdline").read_bytes():
                found.append(int(p.name))
        except OSError:
            continue
    return found


def _state(pid: int) -> str:
    """A process's state and what the kernel has it wait in, from /proc."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        state = next(ln for ln in status.splitlines() if ln.startswith("State:"))
        wchan = Path(f"/proc/{pid}/wchan").read_text()
        threads = len(list(Path(f"/proc/{pid}/task").iterdir()))
        return f"{state.split(None, 1)[1]}, waits in {wchan or '-'}, {threads} threads"
    except (OSError, StopIteration):
        return "gone"


def test_ctrl_c_stops_the_job_and_reports_what_it_compiled(tmp_path: Path) -> None:
    marker = f"--marker-{uuid.uuid4().hex}"  # the job ignores it; /proc shows it
    kept = tmp_path / "trace"
    proc = subprocess.Popen(
        [*compilediag_cmd(), "run", "--trace-dir", str(kept), "--format", "json", "--",
         sys.executable, str(TRAIN), marker],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "JOB_WAIT": "120", "NO_COLOR": "1", "PYTHONFAULTHANDLER": "1"},
        preexec_fn=sigint_as_a_terminal_has_it,
        cwd=ROOT,
    )  # fmt: skip
    assert proc.stderr is not None
    for line in proc.stderr:  # the job's stdout comes on stderr with --format json
        if line.strip() == "ready":
            break
    else:
        pytest.fail("the job never said ready")
    job = _processes_with(marker)
    started = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:  # say where it hung (twice, under a loaded CI)
        states = {pid: _state(pid) for pid in [proc.pid, *job, *_processes_with(marker)]}
        # each process still there prints its Python stacks (faulthandler) and ends
        for pid in [*_processes_with(marker), proc.pid]:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGABRT)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        for pid in _processes_with(marker):
            os.kill(pid, signal.SIGKILL)
        pytest.fail(f"no end 60 s after Ctrl-C; compilediag and the job then: {states}\n"
                    f"{err[-6000:]}")  # fmt: skip
    assert time.monotonic() - started < 30
    assert proc.returncode == 130, err
    report = json.loads(out)
    assert report["runtime"]["interrupted"] is True
    # it compiled the first step before it was stopped: forward, and the code after its break
    assert {g["compile_id"] for g in report["graphs"]} == {"0/0", "1/0"}
    assert graph(report, "0/0")["calls"] == 1
    assert any(kept.glob("*.log")), "the trace is kept"
    assert _processes_with(marker) == []
    # the kept folder gives the same report again
    again = run_cli("report", str(kept), "--format", "json")
    assert json.loads(again.stdout)["runtime"] == report["runtime"]


def test_a_users_sitecustomize_still_runs(tmp_path: Path) -> None:
    theirs = tmp_path / "site"
    theirs.mkdir()
    ran = tmp_path / "ran"
    (theirs / "sitecustomize.py").write_text(
        f"import os\nopen({str(ran)!r}, 'a').write(str(os.getpid()) + '\\n')\n"
    )
    report, proc, torch_saw = run_job(
        tmp_path, "--", sys.executable, str(TRAIN), env={"PYTHONPATH": str(theirs)}
    )
    assert proc.returncode == 0, proc.stderr
    assert ran.exists(), "the user's sitecustomize did not run"
    assert graph(report, "0/0")["calls"] == torch_saw["calls"].count(8), "nor did the probe"


def test_a_command_that_never_compiles(tmp_path: Path) -> None:
    """The bootstrap is there and does nothing: no probe, no torch import."""
    check = (
        "import sys; "
        "assert sys.modules['sitecustomize'].__file__.endswith('bootstrap/sitecustomize.py'); "
        "assert '_compilediag_runtime' not in sys.modules and 'torch' not in sys.modules"
    )
    proc = run_cli("run", "--", sys.executable, "-c", check)
    assert proc.returncode == 2, proc.stderr
    assert "compiled nothing" in proc.stderr and "Traceback" not in proc.stderr
    failed = run_cli("run", "--", sys.executable, "-c", "raise SystemExit(7)")
    assert failed.returncode == 6 and "before it called torch.compile" in failed.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ((), "no command given"),
        (("--", "no-such-command-xyz"), "no-such-command-xyz: command not found"),
        (("--profile-steps", "7-3", "--", "python"), "is not a range of steps"),
        (("--format", "yaml", "--", "python"), "unknown --format"),
    ],
)
def test_bad_input_is_refused_before_the_job_runs(args: tuple, says: str) -> None:
    proc = run_cli("run", *args)
    assert proc.returncode == 2
    assert says in proc.stderr and "Traceback" not in proc.stderr


def test_a_kept_trace_folder_must_be_new_or_empty(tmp_path: Path) -> None:
    (tmp_path / "old.log").write_text("x")
    proc = run_cli("run", "--trace-dir", str(tmp_path), "--", sys.executable, str(TRAIN))
    assert proc.returncode == 2 and "is not empty" in proc.stderr
    assert "trained" not in proc.stdout + proc.stderr, "the job must not have run"


def test_a_two_rank_torchrun_job_whose_ranks_diverge(tmp_path: Path) -> None:
    facts = tmp_path / "facts"
    proc = run_torchrun(JOBS / "ranks_diverge.py", facts, "--fail-on-divergence")
    assert proc.returncode == 1, proc.stderr  # the ranks diverge
    report = json.loads(proc.stdout)
    ranks = {r["rank"]: r for r in report["ranks"]}
    assert set(ranks) == {0, 1}
    for n in (0, 1):
        torch_saw = json.loads((facts / f"rank{n}.json").read_text())
        assert ranks[n]["summary"]["graphs"] == torch_saw["frames"]
        assert ranks[n]["summary"]["graph_breaks"] == torch_saw["graph_breaks"]
        assert ranks[n]["summary"]["recompiles"] == torch_saw["recompiles"]
        # every graph of the rank ran once a step
        mine = [g for g in report["graphs"] if g["compile_id"].startswith(f"r{n}:")]
        assert mine and all(g["calls"] == torch_saw["steps"] for g in mine)
    assert any(
        d["message"].startswith("only rank 1 breaks at ranks_diverge.py")
        for d in report["divergence"]
    )
    # torchrun and both ranks each wrote what they saw; torchrun compiled nothing
    assert report["runtime"]["processes"] == 2


def test_a_transformers_model_trained_for_a_few_steps(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    report, proc, torch_saw = run_job(
        tmp_path, "--profile-steps", "2-3", "--", sys.executable, str(JOBS / "hf_train.py")
    )
    assert proc.returncode == 0, proc.stderr
    s = report["summary"]
    assert s["graphs"] == torch_saw["frames"]
    assert s["graph_breaks"] == torch_saw["graph_breaks"]
    assert s["recompiles"] == torch_saw["recompiles"]
    # every graph ran once a step; the steps are the job's
    assert report["runtime"]["steps"] == torch_saw["steps"]
    assert [g["calls"] for g in report["graphs"]] == [torch_saw["steps"]] * s["graphs"]
    assert report["runtime"]["window_steps"] + len(report["runtime"]["window_stalled"]) == 2
    text = json.dumps(report)
    assert "site-packages" not in text and str(Path.home()) not in text


def test_a_trainer_runs_the_loop_so_no_loop_line_is_the_users(tmp_path: Path) -> None:
    """transformers' Trainer runs the loop (#66): the verdict is a part of the step, and no
    verdict, advice or loop line names the Trainer's own loop (before: Lightning's `advance`
    was read as the user's loop, "bound by loop, 99% of the step")."""
    pytest.importorskip("accelerate")
    proc = run_cli(
        "run", "--format", "json", "--profile-steps", "5-10", "--", sys.executable,
        str(JOBS / "hf_trainer.py"), env={"JOB_OUT": str(tmp_path / "out")}, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0 and proc.stdout.strip(), proc.stderr[-3000:]
    r = json.loads(proc.stdout)["runtime"]
    assert r["steps_at"] == "optimizer" and r["bound"]["part"] != "loop", r["bound"]
    told = [r["bound"]["why"], *json.loads(proc.stdout)["timings"]["notes"]]
    assert not [t for t in told if "trainer.py" in t or "_inner_training_loop" in t], told
    assert all(x["file"].endswith("hf_trainer.py") for x in r["loop"]), r["loop"]


@pytest.mark.full
def test_a_trainers_last_batch_is_advised_at_its_arguments_and_that_removes_it(
    tmp_path: Path,
) -> None:
    """The Trainer builds the DataLoader from the dataset it is given (#76, the fourteenth
    look): the advice named `DataLoader(..., drop_last=True)`, a loader the user never makes.
    It names TrainingArguments' dataloader_drop_last; applied, torch's log has no recompile."""
    pytest.importorskip("accelerate")

    def run(**env: str) -> tuple[dict, int]:
        proc = run_cli(
            "run", "--format", "json", "--", sys.executable, str(JOBS / "hf_trainer.py"),
            env={"JOB_OUT": str(tmp_path / "out"), "JOB_ROWS": "20", "JOB_MAX_STEPS": "6",
                 "TORCH_LOGS": "recompiles", **env},
            timeout=600,
        )  # fmt: skip
        assert proc.returncode == 0 and proc.stdout.strip(), proc.stderr[-3000:]
        return json.loads(proc.stdout), proc.stderr.count("Recompiling function")

    report, logged = run()
    assert len(report["recompiles"]) == logged >= 1
    batch = [r for r in report["recompiles"] if "A smaller batch (8 → 4)" in r["suggestion"]]
    assert batch, [r["suggestion"] for r in report["recompiles"]]
    for r in batch:
        assert "TrainingArguments(..., dataloader_drop_last=True)" in r["suggestion"], r
        assert "DataLoader(..., drop_last=True)" not in r["suggestion"]
    report, logged = run(JOB_DROP_LAST="1")
    assert logged == 0 and report["recompiles"] == []


def test_capture_in_process_counts_what_torch_counted() -> None:
    """`with compilediag.capture() as run:` - for notebooks and test suites."""
    import torch
    from torch._dynamo.testing import CompileCounter

    import compilediag

    def step(x):
        y = torch.relu(x) * 2
        print("in step")  # a graph break
        return y.sum()

    counter = CompileCounter()
    compiled = torch.compile(step, backend=counter)
    with compilediag.capture(profile_steps="2-4") as run:
        for n in (4, 4, 4, 4, 4, 6):
            compiled(torch.randn(n, 8))
    report = run.report()
    line = step.__code__.co_firstlineno + 2
    assert report.summary.graphs == counter.frame_count
    ((file, at),) = {(b.file, b.line) for b in report.graph_breaks}
    assert (Path(file).name, at) == ("test_run.py", line)
    assert report.runtime is not None and report.runtime.steps == 6
    assert report.runtime.window_steps + len(report.runtime.window_stalled) == 3
    by_id = {g.compile_id: g.calls for g in report.graphs}
    assert by_id["0/0"] == 5 and by_id["0/1"] == 1  # the 6-row call recompiled
    assert f"test_run.py:{line}" in str(run)
    assert "<html" in run._repr_html_()
    torch._dynamo.reset()


@pytest.mark.gpu
def test_cuda_graph_skips_under_reduce_overhead(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    report, proc, torch_saw = run_job(
        tmp_path, "--", sys.executable, str(JOBS / "cudagraph_skip.py")
    )
    assert proc.returncode == 0, proc.stderr
    r = report["runtime"]
    assert r["cudagraph_skips"] == torch_saw["cudagraph_skips"] >= 1
    assert any("mutated inputs" in why for why in r["cudagraph_skip_reasons"])
    assert str(ROOT) not in json.dumps(r["cudagraph_skip_reasons"]), "no machine path"


def _sleeper(preexec: Callable[[], None] | None) -> subprocess.Popen:
    """`run` of a job that says it is ready, then sleeps a minute, compiling nothing."""
    proc = subprocess.Popen(
        [*compilediag_cmd(), "run", "--format", "json", "--", sys.executable, "-c",
         "import time; print('ready', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        preexec_fn=preexec,
    )  # fmt: skip
    assert proc.stderr is not None
    for line in proc.stderr:
        if line.strip() == "ready":
            break
    return proc


@pytest.mark.parametrize(
    ("signum", "code", "said"),
    [(signal.SIGINT, 130, "interrupted before"), (signal.SIGTERM, 143, "stopped by SIGTERM")],
    ids=["ctrl-c", "sigterm"],
)
def test_a_signal_before_anything_compiled_is_its_code_with_one_line(
    signum: int, code: int, said: str
) -> None:
    """Ctrl-C ends `run` with 130 and SIGTERM with 143, as `--help` says (a look read 130
    after a TERM)."""
    proc = _sleeper(sigint_as_a_terminal_has_it)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    # the job's own KeyboardInterrupt traceback passes through; compilediag says one line
    assert err.splitlines()[-1].startswith("error: `") and said in err
    assert not compilediag_files(err)
    assert out == ""


def test_ctrl_c_ignored_as_the_run_started_stays_ignored() -> None:
    """A background job of a shell without job control starts with SIGINT ignored, and so
    does what it starts: `run` leaves it so, as Python does, and the job runs to its own end
    (a look read "the command exited with status 0" above "was interrupted")."""
    proc = _sleeper(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    proc.send_signal(signal.SIGINT)
    time.sleep(1)
    assert proc.poll() is None, "ended by a signal it ignored"
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "interrupted" not in err


def test_a_job_without_the_bootstrap_has_no_call_counts() -> None:
    """`python -S` loads no sitecustomize: the trace still tells what compiled, and the
    calls are unknown (null), not zero."""
    torch = pytest.importorskip("torch")
    packages = str(Path(torch.__file__).resolve().parents[1])
    job = (
        f"import sys; sys.path.append({packages!r}); "
        "import torch; f = torch.compile(lambda x: x.relu() * 2, backend='eager'); "
        "f(torch.randn(3)); f(torch.randn(3))"
    )
    proc = run_cli("run", "--format", "json", "--", sys.executable, "-S", "-c", job)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["summary"]["graphs"] == 1
    assert [g["calls"] for g in report["graphs"]] == [None]
    assert report["runtime"]["processes"] == 0
    table = run_cli("run", "--", sys.executable, "-S", "-c", job)
    assert "not counted: no process of the job loaded compilediag's bootstrap" in table.stdout


SEQUENTIAL_JOB = """\
import torch
from torch import nn

model = nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 8))
compiled = torch.compile(model, backend="eager")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(6):
    compiled(torch.randn(4, 8)).sum().backward()
    opt.step()
    opt.zero_grad()
"""


def test_the_steps_model_is_what_torch_compile_was_given_not_torchs_wrapper(
    tmp_path: Path,
) -> None:
    """torch.compile(nn.Sequential(...)): torch compiles its own wrapper first (a frame in
    torch's external_utils.py, on 2.13 and 2.15), and the steps line named that wrapper
    ("the compiled compiled call (torch's wrapper ...)"); the model is the Sequential, at
    its torch.compile line."""
    from compilediag.trace.formats import WRAPPER_FRAME

    job = tmp_path / "seq_job.py"
    job.write_text(SEQUENTIAL_JOB)
    proc = run_cli("run", "--format", "json", "--", sys.executable, str(job), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["graphs"][0]["frame"] == WRAPPER_FRAME  # torch's first frame: its wrapper
    r = report["runtime"]
    assert r["steps"] == 6 and r["steps_at"] == "optimizer"
    assert (r["step_frame"], Path(r["step_file"]).name, r["step_line"]) == (
        "Sequential", "seq_job.py", 5,
    )  # fmt: skip
    proc = run_cli("run", "--", sys.executable, str(job), cwd=tmp_path, env={"COLUMNS": "200"})
    assert "the model: the compiled Sequential (seq_job.py:5)" in proc.stdout
