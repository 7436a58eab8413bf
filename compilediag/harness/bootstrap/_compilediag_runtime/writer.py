"""The probe's start in a job's process (from its environment) and its one file per process
at exit or SIGTERM."""

from __future__ import annotations

import atexit
import json
import os
import signal
import time
from typing import Any

from . import remedies
from .facts import process_facts
from .hooks import install
from .kernel_window import PROFILE_OUT_ENV
from .probe import Probe, parse_window

DIR_ENV = "COMPILEDIAG_RUNTIME_DIR"
STEPS_ENV = "COMPILEDIAG_PROFILE_STEPS"
KERNELS_ENV = "COMPILEDIAG_KERNELS"  # "0": no kernel profile after the window (--no-kernels)
STOP_ENV = "COMPILEDIAG_STOP_AFTER"  # N: the job ends after its step N (--stop-after)
LOSSES_ENV = "COMPILEDIAG_LOSSES"  # "1": each step's loss kept (--try-fixes compares them)

_written = False


def write(probe: Probe, folder: str) -> None:
    global _written
    # a process that compiled nothing writes nothing, unless it kept losses (--check-numerics'
    # eager runs, torch.compile off)
    if _written or not (probe.calls or probe.compile_calls or probe.losses):
        return
    _written = True
    probe.exit_s = time.perf_counter() - probe.started  # the job's own exit is done
    facts = process_facts(probe)
    name = f"runtime-{facts['rank'] if facts['rank'] is not None else 'x'}-{facts['pid']}.json"
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, "." + name)
    with open(tmp, "w") as f:
        json.dump(facts, f)
    os.replace(tmp, os.path.join(folder, name))
    kernels = probe.kernels
    if kernels is not None and kernels.steps and os.environ.get(PROFILE_OUT_ENV) == "1":
        try:  # torch.profiler's own Chrome trace of the kernel steps (--profile-out)
            kernels.export(os.path.join(folder, "kernels-" + name.removeprefix("runtime-")))
        except Exception:  # noqa: BLE001 - a profile that can't be written: the report stands
            pass


def install_from_env() -> None:
    """The probe of a `compilediag run` job's process, from its environment."""
    folder = os.environ.get(DIR_ENV)
    if not folder:
        return
    steps = os.environ.get(STEPS_ENV, "")
    stop = os.environ.get(STOP_ENV, "")
    probe = Probe(
        parse_window(steps) if steps else None, os.environ.get(KERNELS_ENV) != "0",
        int(stop) if stop.isdigit() else None, os.environ.get(LOSSES_ENV) == "1",
    )  # fmt: skip
    remedies.at_dynamo_import()
    install(probe)
    atexit.register(write, probe, folder)
    _write_on_sigterm(probe, folder)


def _write_on_sigterm(probe: Probe, folder: str) -> None:
    """A SIGTERM (torchrun stopping its workers, a scheduler's time limit) ends the process
    without atexit: write first, then end as the signal would have. A handler the job
    installs itself replaces this one."""
    try:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return

        def on_sigterm(signum: int, frame: Any) -> None:
            probe.other.signalled = True  # (an evaluation under way stopped in it)
            write(probe, folder)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)

        signal.signal(signal.SIGTERM, on_sigterm)
    except ValueError:  # not the main thread
        pass
