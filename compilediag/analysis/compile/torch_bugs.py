"""torch's own bugs: a compile that died inside Dynamo's own code. torch re-raises any
exception its tracing did not expect (an AttributeError, a KeyError, ... raised by Dynamo's
Python) as InternalTorchDynamoError, and lets through as they are only its own kinds (a
graph break, a user error, a backend's failure) and AssertionError and IndexError
(torch/_dynamo/convert_frame.py, `_compile`). The metrics name the inner exception; its
traceback (the `dynamo_error` artifact) shows where in torch it was raised, and the user's
line Dynamo was tracing. Such a failure is the torch release's bug, not the user's code: the
advice is a smaller region to compile, a way to go on meanwhile, and torch's route to
report it."""

from __future__ import annotations

import builtins
import os
import re
from dataclasses import replace

from compilediag.analysis.callers import CalledBy
from compilediag.analysis.history import Entry
from compilediag.paths import Owner, library_path, owner_of, package_of, possessive
from compilediag.report.model import CompileFailure
from compilediag.trace.formats import TRACEBACK_FRAME

INTERNAL = "InternalTorchDynamoError"
# Python's exceptions torch lets through unwrapped (2.6 - 2.15), or that are no bug of its
PASSED_THROUGH = {"AssertionError", "IndexError", "MemoryError", "KeyboardInterrupt"}
FROM_USER_CODE = re.compile(r"^\s*from user code:\s*$", re.M)
CARETS = re.compile(r"^\s*[\^~]+\s*$")


def is_internal(fail_type: str) -> bool:
    """A failure torch raised as InternalTorchDynamoError: that name, or an exception of
    Python's own that Dynamo's code raised and torch wraps (not one it lets through)."""
    if fail_type == INTERNAL:
        return True
    kind = getattr(builtins, fail_type, None)
    return (
        isinstance(kind, type) and issubclass(kind, Exception) and fail_type not in PASSED_THROUGH
    )


# a traceback frame: file, line, function, the source line under it
Frame = tuple[str, int, str, str]


def _frames(text: str) -> list[Frame]:
    """Traceback frames, outermost first."""
    out: list[Frame] = []
    for ln in text.splitlines():
        if m := TRACEBACK_FRAME.match(ln):
            out.append((m["file"], int(m["line"]), m["name"].strip(), ""))
        elif out and ln.strip() and not CARETS.match(ln) and not out[-1][3]:
            file, line, name, _ = out[-1]
            out[-1] = (file, line, name, ln.strip())
    return out


def torch_bug(failure: CompileFailure, e: Entry, dynamo_error: str) -> CompileFailure | None:
    """The failure as torch's own bug, with its advice; None where it is not one."""
    if failure.by != "torch.compile" or not is_internal(failure.fail_type):
        return None
    inner = failure.fail_type
    parts = FROM_USER_CODE.split(dynamo_error, 1)
    trace, user_code = parts[0], parts[1] if len(parts) > 1 else ""
    inside = [f for f in _frames(trace) if owner_of(f[0]) == Owner.TORCH]
    user = _frames(user_code)
    own = [i for i, f in enumerate(user) if owner_of(f[0]) == Owner.USER]
    site = user[own[-1]] if own else None
    into = user[own[-1] + 1 :] if own else user
    version = e.metrics.pytorch_version or "this torch"
    reason = failure.reason
    if inner != INTERNAL and not reason.startswith(inner):
        reason = f"{inner}: {reason}"
    said = [_what(inner, version, inside[-1] if inside else None, site, into, e.code.shown)]
    said.append(_smaller(e, site))
    said.append(
        "Meanwhile, TORCHDYNAMO_SUPPRESS_ERRORS=1 (torch._dynamo.config.suppress_errors = "
        "True) lets the job go on: a frame Dynamo fails on runs in eager mode, unoptimised. "
        f"A newer torch may have it fixed (this job ran torch {version})."
    )
    said.append(
        "To report it to PyTorch (github.com/pytorch/pytorch/issues, with the release): "
        "TORCHDYNAMO_VERBOSE=1 prints Dynamo's internal stack; TORCH_COMPILE_REPLAY_RECORD=1 "
        "(needs `pip install dill`) writes the failing frame's record, and "
        "torch._dynamo.replay(file) traces that frame alone. torch's minifier "
        "(TORCHDYNAMO_REPRO_AFTER=dynamo) reduces only a graph Dynamo finished tracing, so it "
        "cannot reduce this one."
    )
    file, line, code = (site[0], site[1], site[3]) if site else (failure.file, failure.line, "")
    return replace(
        failure,
        fail_type=INTERNAL,
        reason=reason,
        file=file,
        line=line,
        code=code or failure.code,
        fix=" ".join(said),
    )


def _what(
    inner: str, version: str, raised: Frame | None, site: Frame | None, into: list[Frame],
    frame: str,
) -> str:  # fmt: skip
    """What happened: where Dynamo was tracing, what its own code raised and where."""
    tracing = f"`{frame}`"
    if site is not None:
        tracing = f"line {site[1]} of {os.path.basename(site[0])} (in `{site[2]}`)"
        calls, last = [], ""
        for file, _, name, _ in into[:3]:
            package = package_of(file)
            calls.append(
                f"{possessive(package)} `{name}`" if package and package != last else f"`{name}`"
            )
            last = package
        if calls:
            tracing += ", into " + " → ".join(calls)
    if inner == INTERNAL:
        raised_what = f"Dynamo raised {INTERNAL}"
    else:
        where = (
            f" in {library_path(raised[0]) or raised[0]}:{raised[1]} ({raised[2]})"
            if raised
            else ""
        )
        raised_what = (
            f"Dynamo's own code raised {inner}{where}, which torch re-raises as {INTERNAL}"
        )
    return (
        f"A bug in torch itself (torch {version}), not in your code: while tracing {tracing}, "
        f"{raised_what}, an internal error of Dynamo."
    )


def _smaller(e: Entry, site: Frame | None) -> str:
    """Compile a smaller region, one that leaves the line Dynamo died on out."""
    line = f"line {site[1]}" if site else "the failing call"
    frame = e.code.shown.split(" (", 1)[0]
    wrap = (
        f"or move {line} into a function decorated `@torch.compiler.disable`, which runs eagerly."
    )
    if frame != "forward" and e.caller.by == CalledBy.FRAMEWORK and e.caller.framework:
        whose = possessive(e.caller.framework)
        return (
            f"To go on, compile a smaller region that leaves {line} out: {whose} loop calls "
            f"`{frame}`, compiled whole; give {e.caller.framework} the model uncompiled and "
            "compile the "
            "nn.Module the step runs (its forward), e.g. `self.net = torch.compile(self.net)` "
            f"in the module's __init__, so {line} runs eagerly; {wrap}"
        )
    if frame != "forward":
        return (
            f"To go on, compile a smaller region that leaves {line} out: the nn.Module "
            f"`{frame}` calls (`model = torch.compile(model)`, its forward) rather than "
            f"`{frame}` whole; {wrap}"
        )
    return (
        f"To go on, compile a smaller region that leaves {line} out: the submodules forward "
        f"calls (`model.block = torch.compile(model.block)`) rather than the whole model; {wrap}"
    )
