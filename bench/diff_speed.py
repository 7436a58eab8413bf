"""`compilediag diff` of two big traces against two `compilediag report`s of them
(#40: the diff should take no longer). `python bench/diff_speed.py TRACE_A TRACE_B`
(bench/make_big_trace.py makes one; a copy of it serves as B): each command a fresh
process, alternated, 3 rounds; the medians and their ratio. Prints JSON."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time


def timed(*args: str) -> float:
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "compilediag", *args], capture_output=True)
    if p.returncode not in (0, 1):
        raise SystemExit(p.stderr.decode()[-2000:])
    return time.perf_counter() - t0


def main() -> None:
    a, b = sys.argv[1], sys.argv[2]
    reports, diffs = [], []
    for _ in range(3):
        reports.append(
            timed("report", a, "--format", "json") + timed("report", b, "--format", "json")
        )
        diffs.append(timed("diff", a, b, "--format", "json"))
    r, d = statistics.median(reports), statistics.median(diffs)
    print(json.dumps({"two_reports_s": reports, "diff_s": diffs, "ratio": round(d / r, 3)}))


if __name__ == "__main__":
    main()
