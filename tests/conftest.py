from __future__ import annotations

import compileall
import contextlib
import fcntl
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# One intra-op thread in every test process and the workers they start: the suite runs a
# pytest worker per core, and two-thread ops in each then wait on a core another process
# holds (OpenMP spins while it waits: CPU burnt, and timings measure the machine).
os.environ.setdefault("OMP_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]

# The package's bytecode, written once: each of the suite's ~150 CLI and worker processes
# would otherwise compile compilediag from source (30-50 ms each) where PYTHONDONTWRITEBYTECODE
# is set, as on this project's machines; a pip install writes it at install time.
compileall.compile_dir(ROOT / "compilediag", quiet=1)

SAMPLES = ROOT / "sample_models"
PACKAGE = ROOT / "compilediag"


def compilediag_files(text: str) -> list[str]:
    """compilediag's own files that `text` names: by their path in the package
    (`compilediag/harness/worker.py`, wherever it is installed), or by the package's folder on this
    machine. A report names the user's files and libraries', never compilediag's; this
    asks just that, whatever the checkout's folder is called (a clone in `compilediag/`
    has that in the path of every user file beneath it)."""
    own = {
        f"compilediag/{p.relative_to(PACKAGE).as_posix()}"
        for p in PACKAGE.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    named = sorted(f for f in own if f in text)
    return named + ([str(PACKAGE)] if f"{PACKAGE}/" in text else [])


TRACES = Path(__file__).parent / "fixtures" / "traces"


def trace_sets(holding: str | None = None) -> list[Path]:
    """Every recorded fixture folder (one per torch version and device); with `holding`,
    those that hold that recording (<holding>.log)."""
    folders = sorted(p for p in TRACES.iterdir() if p.is_dir())
    return [p for p in folders if holding is None or (p / f"{holding}.log").exists()]


def fixture_trace(name: str, folder: Path | None = None) -> Path:
    folder = folder or TRACES / "torch-2.13.0-cpu"
    return folder / f"{name}.log"


def expected_breaks(sample: str) -> list[int]:
    """The break lines a sample model's docstring promises ("... at line 22 ...")."""
    doc = (SAMPLES / sample).read_text().split('"""')[1]
    if "no graph breaks" in doc or "no breaks" in doc:
        return []
    return [int(n) for n in re.findall(r"line (\d+)", doc)]


def read_terminal(primary: int) -> str:
    """All that a pseudo-terminal's other side was sent, until it is closed (the caller
    closed its own copy of that side), as text; the terminal closed after."""
    seen = b""
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # the other side closed (Linux)
            break
        if not chunk:
            break
        seen += chunk
    os.close(primary)
    return seen.decode(errors="replace")


def compilediag_cmd() -> list[str]:
    """The CLI of the Python that runs the tests (its venv's script, else `-m`): not one
    another venv on PATH put first (a shell with another checkout's venv active ran that
    checkout's compilediag, on its torch)."""
    beside = Path(sys.executable).parent / "compilediag"
    return [str(beside)] if beside.exists() else [sys.executable, "-m", "compilediag"]


def eager_sweep(args: tuple[str, ...], cwd: Path) -> tuple[str, ...]:
    """`recompiles` compiles as the user does (Inductor) unless --backend says otherwise; a
    test's sweep that names no backend runs the eager one, whose guards are Dynamo's (the
    tests of a backend's own guards, and of the default, name theirs). A request stream is
    served as compiled (Inductor): left as it is."""
    if not args or args[0] != "recompiles" or "--backend" in args or "--help" in args:
        return args
    model = next((a for a in args[1:] if a.endswith(".py") or ".py:" in a), "")
    path = cwd / model.split(".py:", 1)[0].removesuffix(".py") if model else None
    file = path.with_suffix(".py") if path else None
    serves = "--requests" in args or bool(
        file and file.is_file() and "def get_request_stream" in file.read_text()
    )
    return args if serves else (*args, "--backend", "eager")


def run_cli(
    *args: str,
    timeout: float = 300,
    cwd: Path | None = None,
    env: dict | None = None,
    as_typed: bool = False,
) -> subprocess.CompletedProcess:
    """The command in a process of its own; `as_typed`: exactly these arguments (a sweep with
    no --backend too, whose default the test is of)."""
    args = args if as_typed else eager_sweep(args, cwd or ROOT)
    base = {k: v for k, v in os.environ.items() if k != "GITHUB_ACTIONS"}  # tests choose
    full = {**base, "NO_COLOR": "1", "COLUMNS": "100", **(env or {})}
    return subprocess.run(
        [*compilediag_cmd(), *args], capture_output=True, text=True, timeout=timeout,
        env=full, cwd=cwd or ROOT,
    )  # fmt: skip


def run_torchrun(
    job: Path, facts: Path, *options: str, env: dict[str, str] | None = None, **kw
) -> subprocess.CompletedProcess:
    """`compilediag run --format json OPTIONS -- python -m torch.distributed.run` with 2
    CPU ranks on a free port; each rank writes torch's own counts under `facts`; `env`:
    more of the job's environment."""
    from tests.report.test_report import free_port

    facts.mkdir(exist_ok=True)
    for attempt in (1, 2):
        proc = run_cli(
            "run", "--format", "json", *options, "--",
            sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
            "--master-addr", "127.0.0.1", "--master-port", str(free_port()), str(job),
            env={"JOB_FACTS": str(facts), **(env or {})},
            **kw,
        )  # fmt: skip
        # gloo's threads can abort a rank as its interpreter ends, the job's work done
        # (torch's own teardown, pytorch#179291; 1 run in 12+ on a loaded CI): once more
        if proc.returncode == 0 or GLOO_TEARDOWN not in proc.stderr or attempt == 2:
            return proc
    return proc


GLOO_TEARDOWN = "terminate called without an active exception"


def run_json(*args: str, **kw) -> tuple[dict, subprocess.CompletedProcess]:
    proc = run_cli(*args, "--format", "json", **kw)
    assert proc.stdout.strip(), proc.stderr
    return json.loads(proc.stdout), proc


# Runs shared by the tests of one pytest session, across its xdist workers: a folder named
# by the session's id, one file per run, the first test to ask makes it under a lock.
_SHARED = Path(tempfile.gettempdir()) / (
    "compilediag-tests-" + os.environ.get("PYTEST_XDIST_TESTRUNUID", str(os.getpid()))
)


# tests/fixtures/run_jobs/bounded.py loading its batches slowly (JOB_BOUND=data): a workers
# remedy's loader, once made, fills its prefetch (2 batches a worker) while the first steps
# compile, so steps 4-8 take batches made before them, and later steps wait at the workers'
# own pace. A workers remedy is judged past that: this window, of a job this many steps long.
STEADY, STEADY_STEPS = "9-16", "20"


# The samples whose `recompiles` run also measures each remedy (--try-fixes): the recompile
# tests read the same run's findings (the remedies' runs only add `verified_fixes`).
TRY_FIXES_SAMPLES = ("changing_batch.py", "changing_float.py", "per_layer_int.py")


def recompiles_run(sample: str) -> tuple[str, ...]:
    """The arguments of a sample's shared `recompiles` run (shared_json)."""
    args = ("recompiles", f"sample_models/{sample}")
    return (*args, "--try-fixes", "--jobs", "2") if sample in TRY_FIXES_SAMPLES else args


def spin(deadline: float) -> None:
    """A busy loop until `deadline` (time.time()): another process holding a core."""
    import time

    while time.time() < deadline:
        pass


@contextlib.contextmanager
def busy_every_core(settle_s: float = 0.0) -> Iterator[None]:
    """A busy process on every core while the block runs (at most 300 s, whatever happens
    to the test), waiting `settle_s` for them to start."""
    import multiprocessing
    import time

    ctx = multiprocessing.get_context("spawn")
    deadline = time.time() + 300
    busy = [ctx.Process(target=spin, args=(deadline,), daemon=True)
            for _ in range(os.cpu_count() or 1)]  # fmt: skip
    for p in busy:
        p.start()
    try:
        time.sleep(settle_s)
        yield
    finally:
        for p in busy:
            p.kill()
            p.join()


def sigint_as_a_terminal_has_it() -> None:
    """A Popen preexec_fn for a test that presses Ctrl-C: the process gets SIGINT's default
    disposition, as from a terminal. A suite started in the background (`cmd &` in a script)
    hands its processes SIGINT ignored, and a job started from them would ignore it too."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def shared_json(*args: str) -> tuple[dict, subprocess.CompletedProcess]:
    """run_json, run once per test session for the same arguments, whichever worker asks
    first: for tests that ask different questions of one run. Each caller gets its own copy
    of the report."""
    _SHARED.mkdir(exist_ok=True)
    key = hashlib.sha1("\0".join(args).encode()).hexdigest()[:16]
    saved = _SHARED / f"{key}.json"
    with open(_SHARED / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second asker waits for the first one's run
        if not saved.exists():
            proc = run_cli(*args, "--format", "json")
            assert proc.stdout.strip(), proc.stderr
            saved.write_text(json.dumps([proc.returncode, proc.stdout, proc.stderr]))
    code, out, err = json.loads(saved.read_text())
    return json.loads(out), subprocess.CompletedProcess(list(args), code, out, err)


def assert_timings_consistent(
    report: dict, backend: str, repeat: int | None = None, warmup: int | None = None
) -> None:
    """A CPU report's timings agree with themselves (ratios, sums, method), whatever their
    values: timings vary."""
    t, ct = report["timings"], report["compile_time"]
    e, c = t["eager_ms"], t["compiled_ms"]
    if repeat is not None:
        assert e["n"] == c["n"] == repeat
    assert e["median"] > 0 and c["median"] > 0 and e["iqr"] >= 0 and c["iqr"] >= 0
    assert 0 < e["min"] <= e["median"] and 0 < c["min"] <= c["median"]
    assert t["speedup"] == pytest.approx(e["median"] / c["median"])
    assert report["summary"]["speedup"] == t["speedup"]
    assert t["method"] == "perf_counter"
    if warmup is not None:
        assert t["warmup"] == warmup
    phases = ct["dynamo_s"] + ct["aot_s"] + ct["inductor_s"] + ct["codegen_s"]
    assert all(ct[k] >= 0 for k in ("dynamo_s", "aot_s", "inductor_s", "codegen_s"))
    if backend != "inductor":  # (under Inductor an FX-graph cache hit may take ~0 s)
        assert ct["inductor_s"] == 0
    assert phases <= ct["total_s"] + 1e-6
    # graphs hold the compiles that produced one; compiles that produced none add to the total
    assert ct["total_s"] >= sum(g["compile_time_s"] or 0 for g in report["graphs"]) - 1e-6
    # the first call compiles, so it takes at least the compile time of its graphs
    assert t["first_call_s"] >= min(g["compile_time_s"] or 0 for g in report["graphs"])
    assert t["outputs_match"] is True
    assert t["max_abs_err"] is not None and t["max_abs_err"] < 1e-3


def load_sample(sample: str) -> tuple:
    """A sample model and its calls, loaded in the test's own process."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"sample_{Path(sample).stem}", SAMPLES / sample)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(SAMPLES))
    spec.loader.exec_module(module)
    model = module.get_model() if hasattr(module, "get_model") else module.model
    sets = module.get_input_sets() if hasattr(module, "get_input_sets") else [module.get_inputs()]
    return model, sets


def torch_recompiles(sample: str, config: dict | None = None, **compile_kwargs) -> int:
    """Run the sample's calls in this process under torch's CompileCounter (eager backend),
    and count the graphs each frame got by torch's own compile ids: a frame's recompiles
    are its graphs less one. (Past the recompile limit the attempt that hit it makes no
    graph: torch's recompile log prints it as a recompile, CompileCounter does not count it.)
    `config`: torch._dynamo.config settings to run under."""
    from collections import Counter

    import torch
    from torch._dynamo.testing import CompileCounter

    model, sets = load_sample(sample)
    counter, per_frame = CompileCounter(), Counter()

    def counting(gm, example_inputs):  # the eager backend, counted
        per_frame[torch._guards.CompileContext.current_compile_id().frame_id] += 1
        return counter(gm, example_inputs)

    torch._dynamo.reset()
    with torch._dynamo.config.patch(**(config or {})), torch.no_grad():
        compiled = torch.compile(model, backend=counting, **compile_kwargs)
        for args in sets:
            compiled(*args)
    torch._dynamo.reset()
    assert counter.frame_count == sum(per_frame.values())
    return sum(n - 1 for n in per_frame.values())


@pytest.fixture
def samples() -> Path:
    return SAMPLES


# Tests of 10 s and more (on 2 cores) start first: the parallel run then does not end on
# one of them with the other worker idle.
LONG_TESTS = (
    "test_caches_are_left_on_kernels_survive_a_hit_and_cold_is_private",
    "test_time_lost_to_each_break_is_what_its_eager_code_costs",
    "test_recompile_count_matches_torch",
    "test_reorderable_print_removes_a_print_of_a_string",
    "test_baseline_end_to_end",
    "test_dynamic_true_removes_shape_recompiles",
    # --try-fixes' alternated rounds: minutes each
    "test_the_remedy_for_the_bounding_part_is_measured_and_the_jobs_clock_agrees",
    "test_a_remedy_that_helps_is_kept_applied_and_the_edited_job_is_faster",
    "test_regional_compilations_compile_is_measured_cold_and_warm",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--full", action="store_true",
        help="the whole suite: the tests marked `full` too (end-to-end runs of models, jobs "
        "and Inductor; about 25 minutes on 2 cores, where the default takes under 10)",
    )  # fmt: skip


def pytest_configure(config: pytest.Config) -> None:
    """xdist's controller names the session's run id itself (its workers' _SHARED), so that
    it can remove their folder at the end."""
    if not hasattr(config, "workerinput") and getattr(config.option, "testrunuid", 0) is None:
        import uuid

        config.option.testrunuid = uuid.uuid4().hex


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The session's shared runs and locks are removed at its end, by the process that ran
    it (xdist's controller, after its workers; a run without xdist itself): nothing of the
    suite stays in the temporary folder."""
    if hasattr(session.config, "workerinput"):
        return
    import shutil

    uid = getattr(session.config.option, "testrunuid", None)
    for folder in (_SHARED, _SHARED.with_name(f"compilediag-tests-{uid}") if uid else None):
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--full"):
        skip = pytest.mark.skip(reason="the whole suite's: pytest --full")
        for item in items:
            if item.get_closest_marker("full"):
                item.add_marker(skip)
    # the quiet tests first, one after another while no long test holds the other worker,
    # then the long ones (a quiet test that waits for a long one idles its own worker)
    items.sort(
        key=lambda item: (
            item.get_closest_marker("quiet") is None,
            item.name.split("[")[0] not in LONG_TESTS,
        )
    )  # stable


# Tests marked `quiet` measure a speed by the job's own clock and decide on it (a remedy kept,
# an advice gone once applied, a figure against the steps it was taken from): on 2 cores
# beside another test's job (an Inductor compile, a loader's workers) the job ran at the
# machine's pace, not its own. Each one runs with the machine to itself: every test holds
# the session's machine lock shared, a quiet one holds it alone; a quiet test waiting at
# the gate keeps the next tests from taking it shared before it.
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    _SHARED.mkdir(exist_ok=True)
    quiet = item.get_closest_marker("quiet") is not None
    mode = fcntl.LOCK_EX if quiet else fcntl.LOCK_SH
    with open(_SHARED / "machine.gate", "w") as gate, open(_SHARED / "machine.lock", "w") as lock:
        fcntl.flock(gate, mode)
        if not quiet:
            fcntl.flock(gate, fcntl.LOCK_UN)
        fcntl.flock(lock, mode)
        if quiet:
            fcntl.flock(gate, fcntl.LOCK_UN)
        yield


def work_left_out(runtime: dict, step_ms: list[float] | None = None) -> list[int]:
    """The window's steps left out for the job's other work (an evaluation): those left out
    as stalled are not among them (a loaded CI's machine pauses a step now and then). With
    the job's own step times, each stalled step is long by them too: over twice the median
    of the window's steps kept."""
    stalled = {int(n) for n in runtime.get("window_stalled") or {}}
    if step_ms is not None and stalled:
        a, b = runtime["window"]
        kept = [step_ms[n - 1] for n in range(a, b + 1) if n not in runtime["window_left_out"]]
        for n in stalled:
            assert step_ms[n - 1] > 2 * statistics.median(kept), (n, step_ms, runtime)
    return [n for n in runtime["window_left_out"] if n not in stalled]


def measured_twice(check: Callable[[], None]) -> None:
    """A check of a timing against another clock, under another test's load (CI runs two
    workers on two cores: a figure 4x its quiet value has been seen): where it fails, the
    whole measurement is made again once, and that one must pass. A wrong figure is wrong
    both times; the first failure is kept in the second's message."""
    try:
        check()
    except AssertionError as first:
        try:
            check()
        except AssertionError as second:
            raise AssertionError(f"{second} (the first measurement failed too: {first})") from None
