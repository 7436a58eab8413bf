"""How busy this process's cores are before timing, and how many threads to time with.

Threads that wait on a core another process holds are what turns a 0.1 ms call into
20 ms on a loaded machine (OpenMP's threads spin at each region's barrier until the
descheduled one runs; the blocks of one run stay alike, so their spread does not show
it). The worker watches the cores while it times (`Watch`: the cores' busy time less its
own, others' runnable tasks read between the blocks; no wait of its own); where they were
oversubscribed, the figures are flagged with the thread count that would fit. The count
is never changed: Dynamo guards on it, and another count recompiles the user's model.

No torch here: the worker passes in what torch says (its thread count). What the worker
saw goes back to the CLI as a `Trust` in the worker's folder (`threads.json`), beside
its result.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from compilediag.report.words import plural

# threads + the load beside us above cores + SLACK: oversubscribed (a shell, the CLI's
# own poll of the worker take a little of a core and are no reason to time differently)
SLACK = 0.5
# the environment variables that set the intra-op thread count before torch is imported
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


@dataclass
class Load:
    """What the cores this process may use were doing beside it, over a short window."""

    cores: int  # the cores this process may run on (its affinity)
    busy: float  # core-equivalents others kept busy (/proc/stat), -1 where unread
    runnable: float  # others' tasks running or waiting to run (median of the reads), -1 unread
    loadavg: float  # the 1-minute load average (it may still hold this run's own compile)

    @property
    def beside(self) -> float:
        """The demand of other processes on our cores, in cores: what they kept busy or
        what was waiting to run, the larger; the load average where /proc is not read."""
        if self.busy < 0 and self.runnable < 0:
            return self.loadavg
        return max(self.busy, min(self.runnable, 4.0 * self.cores))

    def words(self) -> str:
        """`load 4.0 beside this run on 2 cores: 2.0 cores busy, 4 tasks running or
        waiting`, with what was measured."""
        seen = []
        if self.busy >= 0:
            seen.append(f"{self.busy:.1f} cores busy")
        if self.runnable >= 0:
            seen.append(f"{self.runnable:g} task{'s' * (self.runnable != 1)} running or waiting")
        how = ": " + ", ".join(seen) if seen else ", the 1-minute load average"
        return f"load {self.beside:.1f} beside this run on {self.cores} cores{how}"


@dataclass
class Threads:
    """The intra-op thread count the timing used, and why."""

    used: int  # what the timing ran with
    default: int  # what torch had in the run (its own choice, or the user's)
    # "torch", "you" (OMP_NUM_THREADS, MKL_NUM_THREADS, the model file) or "compilediag"
    set_by: str
    oversubscribed: bool  # the threads and the load beside us were more than the cores
    load: Load | None = None
    user_setting: str = ""  # what the user set, in words (`OMP_NUM_THREADS=2`)
    fits: int = 0  # the threads the cores left free would take (where oversubscribed)

    @property
    def changed(self) -> bool:
        return self.used != self.default


@dataclass
class Trust:
    """What stands behind the timings: the threads they ran with, whether the cores were
    busy, and what that flags (its text, also in the timings' noise)."""

    threads: Threads | None = None
    flags: list[str] = field(default_factory=list)


def own_cores() -> list[int]:
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def _cpu_jiffies(cores: list[int]) -> tuple[float, float] | None:
    """(busy, total) jiffies summed over `cores`, from /proc/stat's per-core lines."""
    try:
        with open("/proc/stat") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    want = {f"cpu{c}" for c in cores}
    busy = total = 0.0
    seen = 0
    for ln in lines:
        parts = ln.split()
        if parts and parts[0] in want:
            v = [float(x) for x in parts[1:9]]
            idle = v[3] + (v[4] if len(v) > 4 else 0.0)  # idle + iowait
            total += sum(v)
            busy += sum(v) - idle
            seen += 1
    return (busy, total) if seen else None


def _procs_running() -> int | None:
    """Tasks running or waiting to run right now, the system's (this one included)."""
    try:
        with open("/proc/stat") as f:
            for ln in f:
                if ln.startswith("procs_running"):
                    return int(ln.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


class Watch:
    """The load beside this process while it times, with no wait of its own: from `Watch()`
    to `load()`, the busy time of our cores (/proc/stat) less this process's own CPU time,
    and others' tasks running or waiting to run, read (`read()`) between the timing's
    blocks, less this process's own running threads."""

    def __init__(self) -> None:
        self._cores = own_cores()
        self._start, self._mine = _cpu_jiffies(self._cores), os.times()
        self._counts: list[int] = []
        self.read()

    def read(self) -> None:
        n = _procs_running()
        if n is not None:
            self._counts.append(max(0, n - _own_running()))

    def reading(self, progress: Callable[[str], None]) -> Callable[[str], None]:
        """`progress`, told each of the timing's steps, with a read before each."""

        def told(text: str) -> None:
            self.read()
            progress(text)

        return told

    def load(self) -> Load:
        self.read()
        end, mine = _cpu_jiffies(self._cores), os.times()
        try:
            loadavg = os.getloadavg()[0]
        except (OSError, AttributeError):
            loadavg = 0.0
        ours = mine.user + mine.system - self._mine.user - self._mine.system
        busy = _others_cores(self._start, end, ours, len(self._cores))
        busy = -1.0 if busy is None else busy
        runnable = -1.0
        if self._counts:
            # tasks on cores this process may not use don't wait for ours
            share = len(self._cores) / max(os.cpu_count() or len(self._cores), 1)
            runnable = round(statistics.median(self._counts) * share, 1)
        return Load(len(self._cores), busy, runnable, round(loadavg, 2))

    def judged(self, threads: Threads) -> Threads:
        """`threads` as timed, with the load beside them and whether they were more than
        the cores (decide); the count itself is never changed."""
        chosen = decide(threads.default, self.load(), threads.user_setting)
        return replace(
            threads, oversubscribed=chosen.oversubscribed, load=chosen.load, fits=chosen.used
        )


def _own_running() -> int:
    """This process's threads running or waiting to run now (this one, reading, included)."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return 1
    running = 0
    for t in tasks:
        try:
            with open(f"/proc/self/task/{t}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        state = stat[stat.rindex(")") + 2 : stat.rindex(")") + 3]
        running += state == "R"
    return max(1, running)


def user_setting(environ: Mapping[str, str]) -> str:
    """The thread count the user set in the environment, in words ('' where none)."""
    return ", ".join(f"{k}={environ[k]}" for k in THREAD_VARS if environ.get(k))


def decide(threads: int, load: Load, user: str) -> Threads:
    """The threads to time with: torch's own count, or where it and the load beside us
    are more than the cores, the cores left free (at least one). A count the user set
    (`user`, in words) is kept whatever the load."""
    over = threads + load.beside > load.cores + SLACK
    if user or not over:
        return Threads(threads, threads, "you" if user else "torch", over, load, user)
    free = max(1, int(load.cores - load.beside + 0.5))
    used = min(threads, free)
    return Threads(used, threads, "compilediag" if used != threads else "torch", over, load)


class Beside:
    """What other processes kept busy on this process's cores while it waited for a child
    (a job run: its processes' CPU time, reaped, is this process's children's), in cores.
    `start()` before the child, `cores()` after it has been waited for."""

    def __init__(self) -> None:
        self._cores = own_cores()
        self._at: tuple[tuple[float, float] | None, float] | None = None

    def start(self) -> None:
        self._at = (_cpu_jiffies(self._cores), _own_and_children())

    def cores(self) -> float | None:
        """Core-equivalents others kept busy since `start` (None where /proc is not read)."""
        if self._at is None:
            return None
        (start, mine0), end, mine1 = self._at, _cpu_jiffies(self._cores), _own_and_children()
        return _others_cores(start, end, mine1 - mine0, len(self._cores))


def _others_cores(
    start: tuple[float, float] | None, end: tuple[float, float] | None, own_s: float, cores: int
) -> float | None:
    """Core-equivalents other processes kept busy on our `cores` between two /proc/stat
    readings (busy, total jiffies), this process's own CPU seconds (`own_s`) taken out."""
    if start is None or end is None or end[1] <= start[1]:
        return None
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    others = max(0.0, end[0] - start[0] - own_s * tick)
    return round(min(1.0, others / (end[1] - start[1])) * cores, 2)


def _own_and_children() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def busy_cores(threads: Threads, what: str = "call") -> list[str]:
    """The figures flagged where torch's threads and the load beside this run were more
    than the cores: threads that wait on busy cores make a call (`what`: or a step) many
    times its cost (100x was seen), while its blocks agree with each other; the cause and
    the fix, in words."""
    if not threads.oversubscribed or threads.load is None:
        return []
    load = threads.load
    fits = threads.fits or max(1, int(load.cores - load.beside + 0.5))
    keep = f" ({threads.user_setting}, yours, kept)" if threads.user_setting else ""
    fix = (
        "time on a quieter machine"
        if threads.used <= fits  # fewer threads would not help: the load alone fills the cores
        else f"set OMP_NUM_THREADS={fits}, or time on a quieter machine"
    )
    return [
        f"the cores were busy ({load.words()}) for {plural(threads.used, 'thread')}{keep}: a thread "
        f"that waits on a busy core makes every {what} wait, so these figures may be many "
        f"times the {what}s' cost; {fix}"
    ]


def timing_threads(torch: Any, at_import: int) -> Threads:
    """The intra-op threads the timing runs with: torch's own count, never changed
    (Dynamo guards on it, its global state: a compiled call under another count
    recompiles - findings, compile time and caches no longer the user's run's). Busy
    cores flag the figures instead, with the count that would fit (Watch.judged).
    `at_import`: torch's count before the model file ran."""
    threads = torch.get_num_threads()
    user = user_setting(os.environ)
    if not user and threads != at_import:
        user = f"torch.set_num_threads({threads}) in the model file"
    return Threads(threads, threads, "you" if user else "torch", False, None, user)
