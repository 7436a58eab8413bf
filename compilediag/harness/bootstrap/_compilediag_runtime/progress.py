"""A progress line of the probe's on the job's terminal."""

from __future__ import annotations

import os
import sys


def say(text: str) -> None:
    """A progress line on the job's terminal (its stderr a TTY; never when piped), from
    the lowest rank only."""
    if os.environ.get("RANK", "0") != "0":
        return
    try:
        if sys.stderr.isatty():
            sys.stderr.write(f"compilediag: {text}\n")
            sys.stderr.flush()
    except (AttributeError, ValueError, OSError):  # a stream replaced or closed by the job
        pass
