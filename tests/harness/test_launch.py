"""The one launcher (compilediag/harness/launch.py): the worker and a user's command start, end and
stop through it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

from compilediag.harness.launch import start


def _alive(marker: str) -> bool:
    return bool(subprocess.run(["pgrep", "-f", marker], capture_output=True).stdout.strip())


def test_how_a_child_ended_is_typed() -> None:
    env = dict(os.environ)
    ok = start(["sh", "-c", "exit 0"], env).wait()
    assert (ok.returncode, ok.signal, ok.failed) == (0, "", False)
    three = start(["sh", "-c", "exit 3"], env).wait()
    assert three.returncode == 3 and three.failed and three.how() == "exited with status 3"
    term = start(["sh", "-c", "kill -TERM $$"], env).wait()
    assert (term.returncode, term.signal) == (None, "SIGTERM")
    assert term.how() == "was ended by SIGTERM"


def test_a_timeout_stops_the_child_and_what_it_started() -> None:
    marker = f"compilediag-launch-{uuid.uuid4().hex}"
    sleeper = f"{sys.executable} -c 'import time; time.sleep(60)' {marker}"
    child = start(["sh", "-c", f"{sleeper} & sleep 60"], dict(os.environ))
    time.sleep(0.3)
    assert _alive(marker), "the grandchild runs"
    polls: list[float] = []
    done = child.wait(timeout=0.3, poll=lambda: polls.append(time.monotonic()))
    assert done.timed_out and done.returncode is None and done.failed
    assert done.how() == "was stopped at its time limit"
    assert 0.6 <= done.wall_s < 10 and len(polls) >= 3, "polled while it ran"
    time.sleep(0.2)
    assert not _alive(marker), "its own child was stopped with it (one process group)"
