"""Every figure of what a diagnosis costs, in one command, into bench/RESULTS.md.

    python bench/run.py [--runs 5] [--figures 1,2,3,4,5]

Needs `pip install transformers tlparse` beside the project (figure 1 and 2 use a tiny
GPT-2 built from a config; figure 4 compares with tlparse).

Method (each figure says its own): every variant is a fresh process; variants of one
figure run alternately, `--runs` rounds, after one untimed round; the median and the
spread (min-max) are reported, and ratios are taken between medians of the same run.
1. `compilediag explain --no-timings` against a bare script that compiles and calls the
   model once (warm caches: torch's FX-graph/AOTAutograd caches and the compiled C++), and
   against the same script ending in os._exit: compilediag's worker skips the interpreter's
   teardown (1-1.5 s after a compile), so that ratio is what the diagnosis itself adds.
   compilediag's bytecode is compiled first, as a pip install does.
2. The same cold: `--cold` against the bare script with TORCHINDUCTOR_CACHE_DIR pointing
   at a new empty folder each run.
3. `compilediag --help` and `compilediag render report.json`; and whether either imports
   torch.
4. `compilediag report` on a >= 50 MB trace recorded from a real run (bench/make_big_trace.py)
   against `tlparse` on the same file: wall, MB/s, peak RSS (/usr/bin/time).
5. Scaling: `explain --no-timings` for 1, 4, 16, 64 identical blocks and for 0, 4, 16 graph
   breaks; `report` time against trace size (1x, 2x, 4x the same records).
6. `compilediag run` against the same job under plain TORCH_TRACE (bench/jobs/train_steps.py,
   Inductor, warm caches): the job's own steady-state loop
   time (3,000 steps less the first 50), alternating; and the bootstrap's cost at start-up
   (`python -c pass`, and `python -c "import torch._dynamo"`, with and without it on the
   path, 20 alternating runs each).
7. Ranks: `compilediag report` on 64, 256 and 1,024 rank files of one real trace (the
   2.5 MB H200 trace in ../shared/traces, torch 2.11, linked under rank names), one rank
   replaced by another real trace (tests/fixtures' recompile job): wall, peak RSS of the
   largest process (/usr/bin/time's %M: compilediag or one of its digest workers), table
   lines; and 1,024 ranks pinned to one core (taskset -c 0) against all cores.
8. After a plain run: the bare script of figure 1 traced with TORCH_TRACE (warm caches),
   then `explain --no-timings` on the same model, alternating: the compile time each
   reports (the plain run's read from its trace by `compilediag report`) and their FX graph
   cache hits and misses (target: within 10%, hits equal).
9. The profiling window's cost: bench/jobs/train_steps.py (Inductor, warm caches) under
   `compilediag run --profile-steps 1001-1200`, against the same job run plainly: the
   window's step as the report gives it, and the job's own per-step times (its
   perf_counter) of the same steps, median, in the plain run and in the profiled run
   (target: within 5%); and what the report states about the window's cost. `--device
   cuda` trains on the GPU (each step ending in the loss's .item()).
10. The numerics check where outputs match (no search runs): `explain --no-timings` against
   `explain --no-timings --no-numerics` on the models of figure 1, alternating (the check
   adds one eager call of a float64 copy of the model; target: within the runs' spread).
11. `explain` with its timings against a bare script that compiles, calls once, and then
   times the same calls as explain's report says it timed (its warm-up calls, then its
   blocks of calls, eager and compiled alternated, ending in os._exit as explain's worker
   does): what explain adds to the user's own timing loop (target: at most 1.10×).
"""

from __future__ import annotations

import argparse
import compileall
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "compilediag"]

BARE = """
import importlib.util, sys, torch
spec = importlib.util.spec_from_file_location("m", sys.argv[1])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
model, inputs = m.get_model(), m.get_inputs()
with torch.no_grad():
    c = torch.compile(model)
    c(**inputs) if isinstance(inputs, dict) else c(*inputs)
"""

BLOCKS = """
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(32, 32), nn.GELU()) for _ in range({n}))

    def forward(self, x):
        for i, b in enumerate(self.blocks):
            x = b(x)
            if i < {breaks}:
                torch._dynamo.graph_break()
        return x

def get_model():
    return Net()

def get_inputs():
    return (torch.randn(8, 32),)
"""


def wall(cmd: list[str], env: dict[str, str] | None = None) -> float:
    t0 = time.perf_counter()
    subprocess.run(
        cmd, check=True, capture_output=True, cwd=ROOT, env={**os.environ, **(env or {})}
    )
    return time.perf_counter() - t0


def alternate(variants: dict[str, object], runs: int) -> dict[str, list[float]]:
    """variants: name -> (cmd, env) or a callable returning (cmd, env) for each run."""

    def resolve(v: object) -> tuple[list[str], dict[str, str]]:
        return v() if callable(v) else v  # type: ignore[return-value,operator]

    for v in variants.values():
        wall(*resolve(v))
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(runs):
        for name, v in variants.items():
            times[name].append(wall(*resolve(v)))
    return times


def row(name: str, xs: list[float], ref: float | None = None) -> str:
    med = statistics.median(xs)
    ratio = f"{med / ref:.2f}" if ref else ""
    return f"| {name} | {med:.3f} s | {min(xs):.3f}-{max(xs):.3f} | {ratio} |"


# The same script, ending without the interpreter's teardown, as compilediag's worker does:
# freeing torch's objects one by one at exit costs 1-1.5 s of CPU after a compile here.
BARE_NO_TEARDOWN = BARE + "import os; sys.stdout.flush(); os._exit(0)\n"


def figure_overhead(models: list[str], runs: int, cold: bool) -> list[str]:
    tmp = Path(tempfile.mkdtemp())
    bare, quick = tmp / "bare.py", tmp / "bare_no_teardown.py"
    bare.write_text(BARE)
    quick.write_text(BARE_NO_TEARDOWN)
    out = ["| variant | median | spread | ratio to bare |", "|---|---:|---|---:|"]
    ratios = []
    for model in models:
        if cold:

            def fresh_env() -> dict[str, str]:
                return {"TORCHINDUCTOR_CACHE_DIR": tempfile.mkdtemp(prefix="bench-cold-")}

            variants: dict[str, object] = {
                f"bare script, empty caches · {model}": lambda m=model: (
                    [sys.executable, str(bare), m], fresh_env()),
                f"bare script, empty caches, no teardown · {model}": lambda m=model: (
                    [sys.executable, str(quick), m], fresh_env()),
                f"explain --no-timings --cold · {model}": (
                    [*CLI, "explain", model, "--no-timings", "--cold", "--format", "json"], {}),
            }  # fmt: skip
        else:
            variants = {
                f"bare script · {model}": ([sys.executable, str(bare), model], {}),
                f"bare script, no teardown · {model}": (
                    [sys.executable, str(quick), model], {}),
                f"explain --no-timings · {model}": (
                    [*CLI, "explain", model, "--no-timings", "--format", "json"], {}),
            }  # fmt: skip
        times = alternate(variants, runs)
        ref, ref_quick, ours = (statistics.median(v) for v in times.values())
        out += [row(k, v, ref) for k, v in times.items()]
        ratios.append(f"{model}: {ours / ref_quick:.2f}×")
    return out + [
        "",
        "explain over the bare script without its teardown (what the diagnosis adds, the "
        "exit saving left out): " + ", ".join(ratios) + ".",
    ]


def figure_fast_paths(runs: int) -> list[str]:
    saved = Path(tempfile.mkdtemp()) / "report.json"
    trace = ROOT / "tests/fixtures/traces/torch-2.13.0-cpu/graph_breaks.eager.log"
    saved.write_text(subprocess.run([*CLI, "report", str(trace), "--format", "json"],
                                    capture_output=True, text=True, cwd=ROOT).stdout)  # fmt: skip
    exe = shutil.which("compilediag") or sys.exit("install the project first")
    times = alternate(
        {"compilediag --help": ([exe, "--help"], {}),
         "compilediag render report.json": ([exe, "render", str(saved)], {})},
        runs,
    )  # fmt: skip
    probe = (
        "import sys, runpy; sys.argv = ['compilediag', 'render', sys.argv[1]];\n"
        "try: runpy.run_module('compilediag', run_name='__main__')\n"
        "except SystemExit: pass\n"
        "print('torch imported:', 'torch' in sys.modules, file=sys.stderr)"
    )
    imported = subprocess.run([sys.executable, "-c", probe, str(saved)], capture_output=True,
                              text=True, cwd=ROOT).stderr.strip().splitlines()[-1]  # fmt: skip
    out = ["| command | median | spread | target |", "|---|---:|---|---|"]
    out += [row(k, v).rsplit("|", 2)[0] + "| < 0.25 s |" for k, v in times.items()]
    return out + ["", f"`render` of a saved report: {imported}."]


def timed(cmd: list[str]) -> tuple[float, float]:
    proc = subprocess.run(["/usr/bin/time", "-f", "%e %M", *cmd], capture_output=True, text=True)
    w, kb = proc.stderr.strip().splitlines()[-1].split()
    return float(w), int(kb) / 1024


def big_trace(frames: int) -> Path:
    folder = Path(tempfile.mkdtemp(prefix="bench-trace-"))
    subprocess.run([sys.executable, str(ROOT / "bench/make_big_trace.py"), str(folder),
                    "--frames", str(frames)], check=True, cwd=ROOT)  # fmt: skip
    (trace,) = [p for p in folder.iterdir() if p.is_file()]
    return trace


def figure_report(runs: int, trace: Path) -> list[str]:
    tl = shutil.which("tlparse")
    mb = trace.stat().st_size / 1e6
    cmds = {
        "compilediag report": [*CLI, "report", str(trace), "--format", "json", "-o", os.devnull]
    }
    if tl:
        cmds["tlparse"] = [tl, str(trace), "-o", tempfile.mkdtemp(), "--overwrite", "--no-browser"]
    for cmd in cmds.values():
        timed(cmd)
    res: dict[str, list[tuple[float, float]]] = {k: [] for k in cmds}
    for _ in range(runs):
        for k, cmd in cmds.items():
            res[k].append(timed(cmd))
    out = [f"Trace: {mb:.1f} MB.", "", "| tool | wall | MB/s | peak RSS |", "|---|---:|---:|---:|"]
    for k, xs in res.items():
        w = statistics.median(x[0] for x in xs)
        rss = statistics.median(x[1] for x in xs)
        out.append(f"| {k} | {w:.2f} s ({min(x[0] for x in xs):.2f}-{max(x[0] for x in xs):.2f}) "
                   f"| {mb / w:.0f} | {rss:.0f} MB |")  # fmt: skip
    if not tl:
        out.append("\n(tlparse not installed: `pip install tlparse`)")
    return out


def figure_scaling(runs: int, trace: Path) -> list[str]:
    folder = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    out = ["| model | median | spread |", "|---|---:|---|"]
    cases = [(n, 0) for n in (1, 4, 16, 64)] + [(16, k) for k in (4, 16)]
    variants = {}
    for n, k in cases:
        f = folder / f"blocks_{n}_breaks_{k}.py"
        f.write_text(BLOCKS.format(n=n, breaks=k))
        variants[f"{n} blocks, {k} breaks"] = ([*CLI, "explain", str(f), "--no-timings",
                                                "--format", "json"], {})  # fmt: skip
    times = alternate(variants, max(1, runs // 2))
    out += [row(k, v).rsplit("|", 2)[0] + "|" for k, v in times.items()]
    out += ["", "| trace | size | report wall | s per 10 MB |", "|---|---:|---:|---:|"]
    text = trace.read_text()
    for factor in (1, 2, 4):
        big = folder / f"x{factor}.log"
        big.write_text(text * factor)
        w = statistics.median(timed([*CLI, "report", str(big), "--format", "json", "-o",
                                     os.devnull])[0] for _ in range(max(1, runs // 2)))  # fmt: skip
        mb = big.stat().st_size / 1e6
        out.append(f"| {factor}x | {mb:.0f} MB | {w:.2f} s | {w / mb * 10:.2f} |")
    return out


def figure_run(runs: int) -> list[str]:
    job = str(ROOT / "bench" / "jobs" / "train_steps.py")
    py = sys.executable
    bootstrap = str(ROOT / "compilediag" / "bootstrap")

    def loop_time(cmd: list[str], env: dict[str, str]) -> float:
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "loop"
            full = {**os.environ, "LOOP_TIME": str(out), **env}
            if "TORCH_TRACE" in full:
                full["TORCH_TRACE"] = str(Path(d) / "trace")
            subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT, env=full)
            return float(out.read_text())

    variants = {
        "plain TORCH_TRACE": ([py, job], {"TORCH_TRACE": "-"}),
        "compilediag run": ([*CLI, "run", "--", py, job], {}),
    }
    for v in variants.values():
        loop_time(*v)  # untimed: fills the caches
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(runs):
        for name, v in variants.items():
            times[name].append(loop_time(*v))
    ref = statistics.median(times["plain TORCH_TRACE"])
    lines = ["| training loop, 2,950 steps | median | min-max | ratio |", "|---|---|---|---|"]
    lines += [row(k, xs, ref) for k, xs in times.items()]
    probe = {"COMPILEDIAG_RUNTIME_DIR": tempfile.mkdtemp(), "PYTHONPATH": bootstrap}
    starts = {
        "python -c pass": ([py, "-c", "pass"], {}),
        "python -c pass, bootstrap on the path": ([py, "-c", "pass"], probe),
        "import torch._dynamo": ([py, "-c", "import torch._dynamo"], {}),
        "import torch._dynamo, bootstrap (probe installed)": (
            [py, "-c", "import torch._dynamo"], probe,
        ),
    }  # fmt: skip
    start_times = alternate(starts, 20)
    lines += ["", "| start-up | median | min-max | ratio |", "|---|---|---|---|"]
    names = list(starts)
    for plain, boot in (names[:2], names[2:]):
        base = statistics.median(start_times[plain])
        lines += [row(plain, start_times[plain]), row(boot, start_times[boot], base)]
    return lines


def figure_after_plain(models: list[str], runs: int) -> list[str]:
    """Figure 8: what explain reports after the user's own plain run, against that run."""
    tmp = Path(tempfile.mkdtemp())
    bare = tmp / "bare.py"
    bare.write_text(BARE)

    def plain(model: str) -> dict:
        trace = Path(tempfile.mkdtemp(prefix="bench-plain-"))
        subprocess.run([sys.executable, str(bare), model], check=True, capture_output=True,
                       cwd=ROOT, env={**os.environ, "TORCH_TRACE": str(trace)})  # fmt: skip
        out = subprocess.run([*CLI, "report", str(trace), "--format", "json"], check=True,
                             capture_output=True, text=True, cwd=ROOT).stdout  # fmt: skip
        return json.loads(out)["compile_time"]

    def explain(model: str) -> dict:
        out = subprocess.run([*CLI, "explain", model, "--no-timings", "--format", "json"],
                             capture_output=True, text=True, cwd=ROOT).stdout  # fmt: skip
        return json.loads(out)["compile_time"]

    lines = [
        "| model | plain run: compile (median, min-max) | explain: compile | ratio | FX cache, plain | FX cache, explain |",
        "|---|---|---|---:|---|---|",
    ]  # fmt: skip
    for model in models:
        plain(model)  # untimed: the caches warm
        ours, theirs = [], []
        for _ in range(runs):
            theirs.append(plain(model))
            ours.append(explain(model))

        def fx(ct: dict) -> str:
            c = ct.get("caches", {})
            return f"{c.get('fx_graph_cache_hit', 0)} hit, {c.get('fx_graph_cache_miss', 0)} miss"

        a = [c["total_s"] for c in theirs]
        b = [c["total_s"] for c in ours]
        ratio = statistics.median(b) / statistics.median(a)
        lines.append(
            f"| {model} | {statistics.median(a):.3f} s ({min(a):.3f}-{max(a):.3f}) | "
            f"{statistics.median(b):.3f} s ({min(b):.3f}-{max(b):.3f}) | {ratio:.2f} | "
            f"{', '.join(sorted({fx(c) for c in theirs}))} | {', '.join(sorted({fx(c) for c in ours}))} |"
        )  # fmt: skip
    return lines


def figure_window(runs: int, device: str = "cpu") -> list[str]:
    """Figure 9: the profiling window's step against the same steps unprofiled."""
    job = str(ROOT / "bench" / "jobs" / "train_steps.py")
    dev = {"DEVICE": device}
    a, b = 1001, 1200
    py = sys.executable

    def own(times: Path) -> float:
        return statistics.median(json.loads(times.read_text())[a - 1 : b])

    rows: dict[str, list[float]] = {"plain run, the job's own": [],
                                    "under run --profile-steps, the job's own": [],
                                    "under run --profile-steps, the report's window": []}  # fmt: skip
    stated = []
    for i in range(runs + 1):
        with tempfile.TemporaryDirectory() as d:
            times = Path(d) / "plain.json"
            subprocess.run([py, job], check=True, capture_output=True, cwd=ROOT,
                           env={**os.environ, **dev, "STEP_TIMES": str(times)})  # fmt: skip
            plain = own(times)
            profiled = Path(d) / "profiled.json"
            out = subprocess.run(
                [*CLI, "run", "--format", "json", "--profile-steps", f"{a}-{b}", "--", py, job],
                check=True, capture_output=True, text=True, cwd=ROOT,
                env={**os.environ, **dev, "STEP_TIMES": str(profiled)},
            ).stdout  # fmt: skip
            report = json.loads(out)
            if i == 0:
                continue  # untimed: the caches warm
            rows["plain run, the job's own"].append(plain)
            rows["under run --profile-steps, the job's own"].append(own(profiled))
            rows["under run --profile-steps, the report's window"].append(
                report["timings"]["breakdown"]["call_ms"]
            )
            r = report["runtime"]
            stated.append((report["timings"]["breakdown"]["profiled_call_ms"],
                           r.get("unprofiled_step_ms"), r.get("unprofiled_steps")))  # fmt: skip
    ref = statistics.median(rows["plain run, the job's own"])
    lines = [f"| steps {a}-{b} of a 3,000-step loop, {device} | median step | min-max | ratio |",
             "|---|---|---|---|"]  # fmt: skip
    for name, xs in rows.items():
        med = statistics.median(xs)
        lines.append(f"| {name} | {med:.4f} ms | {min(xs):.4f}-{max(xs):.4f} | {med / ref:.3f} |")
    lines += ["", "What each report stated of the window's cost (window step against the "
              "steps around it, timed once each): "
              + "; ".join(f"{w:.4f} against {u:.4f} ms ({n} steps)" for w, u, n in stated if u)]  # fmt: skip
    return lines


def figure_ranks(runs: int) -> list[str]:
    real = ROOT.parent / "shared" / "traces" / "h200_torch2.11_block_break_recompile.log"
    odd = ROOT / "tests" / "fixtures" / "traces" / "torch-2.11.0-cpu" / "recompile.log"
    if not real.exists():
        return [f"(skipped: {real} is not here)"]
    lines = [
        "| ranks | trace | wall (median) | min-max | peak RSS | table lines |",
        "|---|---|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory() as d:
        folders = {}
        for n in (64, 256, 1024):
            folder = Path(d) / str(n)
            folder.mkdir()
            for i in range(n):
                source = odd if i == n // 3 else real
                (folder / f"dedicated_log_torch_trace_rank_{i}_x.log").symlink_to(source)
            folders[n] = folder
        for n, folder in folders.items():
            walls, rss = [], []
            for _ in range(runs):
                w, m = timed([*CLI, "report", str(folder)])
                walls.append(w)
                rss.append(m)
            out = subprocess.run([*CLI, "report", str(folder)], capture_output=True, text=True)
            size = sum(f.stat().st_size for f in folder.iterdir()) / 1e6
            lines.append(
                f"| {n} | {size:.0f} MB | {statistics.median(walls):.2f} s | "
                f"{min(walls):.2f}-{max(walls):.2f} | {max(rss):.0f} MB | "
                f"{len(out.stdout.splitlines())} |"
            )
        if shutil.which("taskset"):
            one = [timed(["taskset", "-c", "0", *CLI, "report", str(folders[1024])])[0]
                   for _ in range(runs)]  # fmt: skip
            all_ = [timed([*CLI, "report", str(folders[1024])])[0] for _ in range(runs)]
            lines += [
                "",
                "| 1,024 ranks | median | min-max | ratio |",
                "|---|---|---|---|",
                row("one core (taskset -c 0)", one),
                row(f"all {os.cpu_count()} cores", all_, statistics.median(one)),
            ]
    return lines


def figure_numerics(models: list[str], runs: int) -> list[str]:
    """Figure 10: explain with its numerics check against explain without it."""
    out = ["| variant | median | spread | ratio to --no-numerics |", "|---|---:|---|---:|"]
    for model in models:
        base = [*CLI, "explain", model, "--no-timings", "--format", "json"]
        times = alternate(
            {f"explain --no-numerics · {model}": ([*base, "--no-numerics"], {}),
             f"explain · {model}": (base, {})}, runs,
        )  # fmt: skip
        ref = statistics.median(next(iter(times.values())))
        out += [row(k, v, ref) for k, v in times.items()]
    return out


# BARE, then the timing loop a user writes, ending without the teardown as explain's worker
# does: argv[2:] are the warm-up calls, the blocks per variant and the calls per block
# explain's report gave.
BARE_TIMED = (
    BARE
    + """
import os, time
warmup, blocks, calls = map(int, sys.argv[2:5])
call = (lambda f: f(**inputs)) if isinstance(inputs, dict) else (lambda f: f(*inputs))
with torch.no_grad():
    for f in (model, c):
        for _ in range(warmup):
            call(f)
    times = {model: [], c: []}
    for _ in range(blocks):
        for f in (model, c):
            t0 = time.perf_counter()
            for _ in range(calls):
                call(f)
            times[f].append(time.perf_counter() - t0)
sys.stdout.flush(); os._exit(0)
"""
)


def figure_explain_timings(models: list[str], runs: int) -> list[str]:
    """Figure 11: explain with its timings against a bare compile and a timing loop of the
    same calls."""
    tmp = Path(tempfile.mkdtemp())
    script = tmp / "bare_timed.py"
    script.write_text(BARE_TIMED)
    out = ["| variant | median | spread | ratio to the bare loop |", "|---|---:|---|---:|"]
    for model in models:
        cmd = [*CLI, "explain", model, "--format", "json"]
        t = json.loads(subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT,
                                      text=True).stdout)["timings"]  # fmt: skip
        counts = [str(t["warmup"]), str(t["repeat"]), str(t["calls_per_block"])]
        saved: list[Path] = []

        def explain(saved: list[Path] = saved, cmd: list[str] = cmd) -> tuple[list[str], dict]:
            saved.append(tmp / f"explain_{len(saved)}.json")  # each run's own phases
            return [*cmd, "-o", str(saved[-1])], {}

        times = alternate(
            {f"bare compile + {t['repeat']} blocks of {t['calls_per_block']} calls · {model}":
                ([sys.executable, str(script), model, *counts], {}),
             f"explain · {model}": explain}, runs,
        )  # fmt: skip
        ref = statistics.median(next(iter(times.values())))
        out += [row(k, v, ref) for k, v in times.items()]
        out.append(f"| explain's phases (report.took_s, median of {runs} runs) · {model} | "
                   + phases_of(saved[1:]) + " | | |")  # fmt: skip
    return out


def phases_of(saved: list[Path]) -> str:
    """Each phase's median over the runs' reports, largest first, in seconds."""
    took = [json.loads(p.read_text())["took_s"] for p in saved]
    medians = {k: statistics.median(t.get(k, 0.0) for t in took) for k in took[0]}
    return " · ".join(f"{k} {v:.2f}" for k, v in sorted(medians.items(), key=lambda kv: -kv[1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--figures", default="1,2,3,4,5,6,7,8,9,10,11")
    ap.add_argument("--frames", type=int, default=70, help="frames of the big trace (~50 MB)")
    ap.add_argument("--device", default="cpu", help="figure 9's device (cpu, cuda)")
    args = ap.parse_args()
    wanted = {int(x) for x in args.figures.split(",")}
    # compilediag's bytecode, as a pip install writes it (an editable install writes none,
    # and this project's machines set PYTHONDONTWRITEBYTECODE): torch's is there already.
    compileall.compile_dir(ROOT / "compilediag", quiet=1)
    import torch

    models = ["sample_models/transformer_block.py", "bench/models/gpt2_tiny.py"]
    lines = [
        "# Benchmark results",
        "",
        f"{datetime.date.today()} · {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores · Python {platform.python_version()} · torch {torch.__version__}"
        f" · `python bench/run.py --runs {args.runs}` (method: bench/run.py's docstring)",
    ]
    sections = []
    if 1 in wanted:
        sections.append(("1. explain over a bare compile-and-call, warm caches (target ≤ 1.05×)",
                         figure_overhead(models, args.runs, cold=False)))  # fmt: skip
    if 2 in wanted:
        sections.append(
            ("2. The same, cold", figure_overhead(models, max(1, args.runs // 2), cold=True))
        )
    if 3 in wanted:
        sections.append(
            ("3. --help and render (target < 0.25 s, no torch)", figure_fast_paths(args.runs))
        )
    trace = big_trace(args.frames) if wanted & {4, 5} else None
    if 4 in wanted and trace:
        sections.append(("4. report against tlparse", figure_report(args.runs, trace)))
    if 5 in wanted and trace:
        sections.append(("5. Scaling", figure_scaling(args.runs, trace)))
    if 6 in wanted:
        sections.append(("6. run over plain TORCH_TRACE (target ≤ 1.02×)", figure_run(args.runs)))
    if 7 in wanted:
        sections.append(("7. Ranks: report on 64 to 1,024 ranks", figure_ranks(args.runs)))
    if 8 in wanted:
        sections.append(("8. After a plain run: explain's compile and caches against the run's "
                         "(target: within 10%, hits equal)",
                         figure_after_plain(models, args.runs)))  # fmt: skip
    if 9 in wanted:
        sections.append(("9. The profiling window's step against the same steps unprofiled "
                         "(target: within 5%)", figure_window(args.runs, args.device)))  # fmt: skip
    if 10 in wanted:
        sections.append(("10. The numerics check where outputs match (target: within the spread)",
                         figure_numerics(models, args.runs)))  # fmt: skip
    if 11 in wanted:
        sections.append(("11. explain with timings over a bare compile and a timing loop of the "
                         "same calls (target ≤ 1.10×)",
                         figure_explain_timings(models, args.runs)))  # fmt: skip
    results = ROOT / "bench" / "RESULTS.md"
    kept = {}  # figures not run this time keep their last result, said so in the header
    if wanted != set(range(1, 12)) and results.exists():
        for part in results.read_text().split("\n## ")[1:]:
            title, _, body = part.partition("\n")
            if int(title.split(".")[0]) not in wanted:
                kept[title] = body.strip("\n").splitlines()
        lines.append(f"Figures {args.figures} from this run; the others kept from the last one.")
    new = dict(sections)
    for title in sorted({*kept, *new}, key=lambda t: int(t.split(".")[0])):
        body = new.get(title, kept.get(title, []))
        lines += ["", f"## {title}", "", *body]
        if title in new:
            print(f"\n## {title}\n" + "\n".join(body), flush=True)
    tmp = results.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(results)


if __name__ == "__main__":
    main()
