"""The window's pace against the job's own (#74):
`python bench/pace.py [ROUNDS] [--root DIR] [--before DIR] [--jobs one_ms,gloo_ddp,mlp_cuda,gpt_nccl]
[--window A-B --iters N]` (the window and the job's length, where not each job's own below).

The jobs, each timing itself with its own clock (time.perf_counter):
- `one_ms`: tests/fixtures/run_jobs/one_ms_step.py, a compiled MLP and AdamW, a step of about
  a millisecond on the CPU (Inductor), 80 steps, the window 30-40;
- `gloo_ddp`: tests/fixtures/run_jobs/slow_batch_ddp.py on 2 gloo ranks (torchrun), rank 1's
  make_batch 8 ms slower, 40 iterations, the window 12-22; and the same job with no slow
  rank, which gives what the slow rank costs the job (slow minus plain);
- `mlp_cuda` (on a GPU, bench/gpu_pace.sh): tests/fixtures/run_jobs/mlp_launch.py, a
  launch-bound MLP whose steps end in a synchronize, 80 steps, the window 30-40;
- `gpt_nccl` (on 2 GPUs, bench/gpu_pace.sh): tests/fixtures/run_jobs/gpt_ddp.py, the
  nanoGPT-style DDP job over NCCL (Inductor, no evaluation), rank 1's get_batch built token
  by token in Python, 32 iterations, the window 10-20; and the same job with no slow rank.

Kinds of run, each a fresh process with one intra-op thread (OMP_NUM_THREADS=1 unless set),
alternated ROUNDS times (default 4): the job alone
(`plain`), and `compilediag run --profile-steps A-B --no-kernels -- JOB` (`run`), with the
compilediag of `--root` (default this checkout), and with `--before DIR` (a worktree of an
older commit) a third kind, `compilediag run` with that tree's compilediag, in the same
rounds: the "before" column. For each run: the job's own median step over the window's steps, the
report's step (`timings.breakdown.call_ms`), and with two ranks rank 0's wait for rank 1. Printed:
per kind the median of its runs; `window pace` = run's own median over the window / plain's
(and `window_pace_paired`: each round's ratio to its own plain run, their geometric mean and
95% interval, as --try-fixes judges a remedy);
`in_run_pace` = (window / the 5 steps just before it) in run's runs over the same in plain's,
each by the job's clock (a host whose pace moves between runs moves both steps alike);
`around_pace`: the same against the 10 steps before the window and the 10 after it (where the
job runs that long: --iters);
on `gpt_nccl`, `wait_over_extra` = the report's wait / the slow rank's extra get_batch time
over the window's steps in the same run (rank 1's batch_ms minus rank 0's, the job's clock);
`report's step` = the report's step / plain's own median; with two ranks, `wait / cost` = the
report's wait / (plain slow - plain without the slow rank). JSON on stdout."""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
JOBS = HERE / "tests" / "fixtures" / "run_jobs"


def _port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


ITERS: dict[str, str] = {}  # the job's length, where --iters sets it


def _job(name: str, env: dict[str, str]) -> list[str]:
    if name == "one_ms":
        env.update(JOB_BACKEND="inductor", JOB_STEPS="80")
        return [sys.executable, str(JOBS / "one_ms_step.py")]
    if name == "mlp_cuda":
        env.update(JOB_STEPS="80")
        return [sys.executable, str(JOBS / "mlp_launch.py")]
    script = "slow_batch_ddp.py"
    env.update(JOB_ITERS="40")
    if name == "gpt_nccl":
        script = "gpt_ddp.py"
        env.update(JOB_ITERS="32", JOB_BACKEND="inductor", JOB_EVAL_RANK="-1",
                   JOB_SLOW_RANK=env.pop("JOB_SLOW_RANK", "1"))  # fmt: skip
    return [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
            "--master-addr", "127.0.0.1", "--master-port", _port(),
            str(JOBS / script)]  # fmt: skip


WINDOW = {"one_ms": (30, 40), "gloo_ddp": (12, 22), "mlp_cuda": (30, 40), "gpt_nccl": (10, 20)}
RANKS = ("gloo_ddp", "gpt_nccl")  # two ranks, one slow: its cost against the report's wait


def one(name: str, kind: str, root: Path, out: Path, slow: bool = True) -> dict[str, float]:
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    facts = out / f"{name}_{kind}_{slow}"
    facts.mkdir(parents=True, exist_ok=True)
    env["JOB_FACTS"] = str(facts if name in RANKS else facts / "rank0.json")
    env["PYTHONPATH"] = str(JOBS)  # the jobs' own helpers (torch_counts)
    if not slow:
        env["JOB_SLOW_MS"], env["JOB_SLOW_RANK"] = "0", "-1"
    cmd = _job(name, env)
    if name in ITERS:
        env["JOB_ITERS" if name in RANKS else "JOB_STEPS"] = ITERS[name]
    a, b = WINDOW[name]
    report = facts / "report.json"
    if kind == "run":
        env["PYTHONPATH"] = os.pathsep.join([str(root), str(JOBS)])
        cmd = [sys.executable, "-m", "compilediag", "run", "--profile-steps", f"{a}-{b}",
               "--no-kernels", "--format", "json", "-o", str(report), "--", *cmd]  # fmt: skip
    for attempt in (1, 2):  # a torchrun whose free port was taken meanwhile: once more
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, cwd=HERE)
        if done.returncode == 0:
            break
        if attempt == 2 or "EADDRINUSE" not in done.stderr + done.stdout:
            raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
        cmd = [_port() if c == cmd[cmd.index("--master-port") + 1] else c for c in cmd]
    own = json.loads((facts / "rank0.json").read_text())["step_ms"]
    got = {"own": statistics.median(own[a - 1 : b])}
    # within the run: the window against the 5 steps just before it, by the job's clock (on a
    # host whose pace moves between runs, what a run-to-run ratio cannot hold still)
    got["in_run"] = got["own"] / statistics.median(own[a - 6 : a - 1])
    if len(own) >= b + 10 and a > 11:  # the 10 steps before the window and the 10 after it
        got["around"] = got["own"] / statistics.median(own[a - 11 : a - 1] + own[b : b + 10])
    slow_rank = facts / "rank1.json"
    if name == "gpt_nccl" and slow:  # the slow rank's extra batch time over the window's steps
        mine = json.loads(slow_rank.read_text())["batch_ms"][a - 1 : b]
        theirs = json.loads((facts / "rank0.json").read_text())["batch_ms"][a - 1 : b]
        got["extra_ms"] = statistics.median(x - y for x, y in zip(mine, theirs, strict=True))
    if kind == "run":
        data = json.loads(report.read_text())
        breakdown = (data.get("timings") or {}).get("breakdown") or {}
        got["report"] = breakdown.get("call_ms") or 0.0
        got["wait"] = breakdown.get("communication_wait_ms") or 0.0
    return got


def paired(runs: dict[str, list[dict[str, float]]], key: str) -> dict[str, Any] | None:
    """Run's `key` over plain's own step, round by round: the geometric mean of the
    rounds' ratios and its 95% interval (analysis/step/trials.effect, Student's t)."""
    sys.path.insert(0, str(HERE))
    from compilediag.analysis.step.trials import effect

    got = effect([(p["own"], r[key]) for p, r in zip(runs["plain"], runs["run"], strict=True)])
    if got is None:
        return None
    return {"ratio": round(got.ratio, 3), "interval": [round(got.low, 3), round(got.high, 3)],
            "rounds": got.pairs}  # fmt: skip


def main() -> None:
    args = sys.argv[1:]
    root, before = HERE, None
    if "--root" in args:
        i = args.index("--root")
        root = Path(args[i + 1]).resolve()
        del args[i : i + 2]
    if "--before" in args:
        i = args.index("--before")
        before = Path(args[i + 1]).resolve()
        del args[i : i + 2]
    jobs = ["one_ms", "gloo_ddp"]
    if "--jobs" in args:
        i = args.index("--jobs")
        jobs = args[i + 1].split(",")
        del args[i : i + 2]
    if "--window" in args:
        i = args.index("--window")
        a, b = (int(n) for n in args[i + 1].split("-"))
        WINDOW.update({name: (a, b) for name in WINDOW})
        del args[i : i + 2]
    if "--iters" in args:
        i = args.index("--iters")
        ITERS.update({name: args[i + 1] for name in WINDOW})
        del args[i : i + 2]
    rounds = int(args[0]) if args else 4
    out = Path(tempfile.mkdtemp(prefix="bench_pace_"))
    result: dict[str, dict] = {"root": {"path": str(root)}}
    for name in jobs:
        runs: dict[str, list[dict[str, float]]] = {
            "plain": [], "run": [], "plain_fast": [], "before": []
        }  # fmt: skip
        for _ in range(rounds):
            runs["plain"].append(one(name, "plain", root, out))
            runs["run"].append(one(name, "run", root, out))
            if before is not None:
                runs["before"].append(one(name, "run", before, out))
            if name in RANKS:
                runs["plain_fast"].append(one(name, "plain", root, out, slow=False))

        def med(kind: str, key: str, runs: dict[str, list[dict[str, float]]] = runs) -> float:
            return statistics.median(r[key] for r in runs[kind])

        plain = med("plain", "own")
        row = {
            "plain_own_ms": round(plain, 4),
            "run_own_ms": round(med("run", "own"), 4),
            "report_step_ms": round(med("run", "report"), 4),
            "window_pace": round(med("run", "own") / plain, 3),
            "report_step_ratio": round(med("run", "report") / plain, 3),
            "window_pace_each": [round(r["own"] / plain, 3) for r in runs["run"]],
            # the window over the steps just before it, run's over plain's (each a median)
            "in_run_pace": round(med("run", "in_run") / med("plain", "in_run"), 3),
            "in_run_each": {k: [round(r["in_run"], 3) for r in runs[k]] for k in ("plain", "run")},
            "around_each": {
                k: [round(r["around"], 3) for r in runs[k] if "around" in r]
                for k in ("plain", "run")
            },
            "around_pace": (
                round(med("run", "around") / med("plain", "around"), 3)
                if all("around" in r for r in runs["run"] + runs["plain"])
                else None
            ),
            # each round's run over its own plain run: the ratio and its 95% interval (the
            # --try-fixes method: a host whose pace moves between processes widens it)
            "window_pace_paired": paired(runs, "own"),
            # the report's step against the job's own median over the window, in the same run
            "report_over_own_each": [round(r["report"] / r["own"], 3) for r in runs["run"]],
            "report_step_paired": paired(runs, "report"),
        }
        if name == "gpt_nccl":  # the wait against the slow rank's extra work in the same run
            row["wait_over_extra"] = round(med("run", "wait") / med("run", "extra_ms"), 3)
            row["wait_over_extra_each"] = [round(r["wait"] / r["extra_ms"], 3) for r in runs["run"]]
        if before is not None:
            row.update(
                before_window_pace=round(med("before", "own") / plain, 3),
                before_report_step_ratio=round(med("before", "report") / plain, 3),
                before_in_run_pace=round(med("before", "in_run") / med("plain", "in_run"), 3),
            )
            if name == "gpt_nccl":
                row["before_wait_over_extra"] = round(
                    med("before", "wait") / med("before", "extra_ms"), 3
                )
        if name in RANKS:
            cost = plain - med("plain_fast", "own")
            row.update(slow_rank_cost_ms=round(cost, 4), report_wait_ms=round(med("run", "wait"), 4),
                       wait_over_cost=round(med("run", "wait") / cost, 3) if cost > 0 else None)  # fmt: skip
            if before is not None:
                row["before_wait_over_cost"] = round(med("before", "wait") / cost, 3)
        result[name] = row
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
