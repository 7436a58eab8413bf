"""The torch releases compilediag is tested with, and what its advice may name on each.

Versions are read as text (`torch.__version__` from the worker, a trace's `torch_version`
record, the installed distribution's metadata): nothing here imports torch.
"""

from __future__ import annotations

import re
from importlib import metadata

# the oldest and the newest release the suite runs on (recorded traces of 2.6, 2.11, 2.13,
# 2.14 and 2.15; CI runs every test on 2.13 and 2.15)
OLDEST_TESTED = (2, 6)
NEWEST_TESTED = (2, 15)

# from this release torch records a graph break it cannot resume from before it skips the
# frame, and records none where the break raises (fullgraph=True): checked on 2.13, 2.14, 2.15
BREAK_RECORDED_ON_SKIP = (2, 13)

_RELEASE = re.compile(r"\s*(\d+)\.(\d+)")


def release(version: str) -> tuple[int, int] | None:
    """`2.15.0+cu132` -> (2, 15); None for text that names no release."""
    m = _RELEASE.match(version or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def installed() -> str:
    """The installed torch's version ('' where there is none), without importing it."""
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return ""


def tested_range() -> str:
    return "{}.{} to {}.{}".format(*OLDEST_TESTED, *NEWEST_TESTED)


def untested_notice(version: str) -> str | None:
    """One line for a torch outside the tested range (it still runs: no error, no downgrade)."""
    r = release(version)
    if r is None or OLDEST_TESTED <= r <= NEWEST_TESTED:
        return None
    side = "newer" if r > NEWEST_TESTED else "older"
    return (
        f"torch {version} is {side} than the releases compilediag is tested with "
        f"({tested_range()}): a finding whose format changed may be missing."
    )


def nonstrict_trace(version: str) -> str | None:
    """The decorator that keeps a call Dynamo can't trace in the graph as one opaque op:
    torch.compiler's from 2.14, torch._dynamo's from 2.7, none before."""
    r = release(version)
    if r is None or r >= (2, 14):
        return "torch.compiler.nonstrict_trace"
    return "torch._dynamo.nonstrict_trace" if r >= (2, 7) else None


# A graph-break site whose registry id changed between releases (docs/torch-releases.md):
# (old id, new id) -> the release and what changed. `diff` says it beside the change.
ID_CHANGES = {
    ("GB0007", "GB9193"): "2.15 gave a call to a time function its own id; the same fix",
    ("GB0059", "GB0569"): "2.14 gave str()/repr() of a tensor its own id; the same fix",
    ("GB0811", "GB9493"): "2.14 gave a zip passed in its own id; the same fix",
}


def id_change(old: str | None, new: str | None) -> str:
    """What docs/torch-releases.md says of a site's id changing from `old` to `new`."""
    said = ID_CHANGES.get((old or "", new or "")) or ID_CHANGES.get((new or "", old or ""))
    return said or ""
