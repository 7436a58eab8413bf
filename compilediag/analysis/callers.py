"""Whose call a compiled frame is, decided once on the whole stack: the user's own line
(or compilediag's worker, which passes the inputs the user's file made), a library calling
its own code, or a framework's loop (the Trainer, accelerate, Lightning, any installed
package that runs the user's model for them). What a recompiling frame's inputs are - ones
the user passes and can mark, or values the library or the framework's loop made - follows
from it, and every piece of advice reads it here (`Entry.caller`), never from one frame."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from enum import StrEnum

from compilediag.paths import Owner, installed_package, library_path, owner_of
from compilediag.trace.compiles import Frame

# the runtime probe `compilediag run` puts in the job's processes: it passes the call on
PROBE_PATH = "_compilediag_runtime/"

# frameworks that run the training step for the user, by a path from the package down, and
# how the advice names them; an installed package not listed here that calls the user's
# compiled code is named by its package
FRAMEWORK_LOOPS: tuple[tuple[str, str], ...] = (
    ("transformers/trainer", "the Trainer"),
    ("accelerate/", "accelerate"),
    ("lightning/", "Lightning"),
    ("pytorch_lightning/", "Lightning"),
    ("lightning_fabric/", "Lightning Fabric"),
)


def drop_last_code(framework: str) -> str:
    """The setting that drops a loader's last, partial batch: the Trainer's argument (it
    builds the DataLoader from the dataset it is given), else the DataLoader's own."""
    if framework == "the Trainer":
        return "TrainingArguments(..., dataloader_drop_last=True)"
    return "DataLoader(..., drop_last=True)"


# a loop's function (or file) that evaluates: where a framework switches to eval()
EVALUATION = re.compile(r"val|eval|predict|test|infer", re.I)


class CalledBy(StrEnum):
    USER = "user"  # the user's own line called it, through torch's call machinery only
    HARNESS = "harness"  # compilediag's worker, with the inputs the user's file made
    LIBRARY = "library"  # the library's own code, with values the library made
    FRAMEWORK = "framework"  # a framework's loop, with the batches it passes
    UNKNOWN = "unknown"  # the trace holds no stack


@dataclass(frozen=True)
class Caller:
    """Who called a compiled frame."""

    by: CalledBy = CalledBy.UNKNOWN
    frame: Frame | None = None  # the frame that made the call (the user's line, the loop's)
    package: str = ""  # that frame's installed package, for a library's or framework's call
    user: Frame | None = None  # the user's innermost line below the call (`trainer.fit(...)`)
    # an installed package's frames between the user's line and the compiled call
    # (a framework's loop), outermost first
    through: tuple[Frame, ...] = ()
    loop: str = ""  # the framework whose loop the call is under, anywhere on the stack

    @property
    def passes_inputs(self) -> bool:
        """The frame's inputs are ones the user passes (and so can mark, pad or drop)."""
        return self.by in (CalledBy.USER, CalledBy.HARNESS)

    @property
    def framework(self) -> str:
        """The framework that made the call, as the advice names it ('' for none)."""
        if self.by != CalledBy.FRAMEWORK or self.frame is None:
            return ""
        return framework_name(self.frame.file) or self.package

    def evaluation_loop(self) -> Frame | None:
        """The framework's frame that runs its evaluation (its validation loop), the innermost
        whose function or file says so; else the frame that made the call."""
        frames = [f for f in reversed(self.through) if installed_package(f.file)]
        named = next((f for f in frames if EVALUATION.search(f.name)), None)
        return named or next(
            (f for f in frames if EVALUATION.search(os.path.basename(f.file))), self.frame
        )


def framework_name(file: str) -> str:
    """A known framework's name for a file of its, '' for any other."""
    path = file.replace("\\", "/")
    return next((name for marker, name in FRAMEWORK_LOOPS if marker in path), "")


def shown(f: Frame) -> str:
    """A frame as the advice names it: `validation_loop` in minifit/loops.py:20."""
    where = library_path(f.file) or os.path.basename(f.file)
    return f"`{f.name}` in {where}:{f.line}"


def passes_through(f: Frame) -> bool:
    """torch's call machinery, Python's own frames (runpy, functools, contextlib) and
    compilediag's: they hand the call on with the values they were given."""
    return owner_of(f.file) in (Owner.TORCH, Owner.PYTHON, Owner.COMPILEDIAG)


def caller_of(stack: list[Frame], code_name: str, code_package: str) -> Caller:
    """Who called the frame compiled with this stack (outermost first, ending at the frame
    itself): the innermost frame below it that is not call machinery. The user's line →
    the user's call; compilediag's worker (nothing of the user's in between) → the
    harness's call, with the user's inputs; an installed package → a framework's loop where
    the compiled code is not that package's own (the user's model, torch's wrapper of it)
    or the package is a known framework, else the library's own call."""
    loop = next((n for f in reversed(stack) if (n := framework_name(f.file))), "")
    callers = list(stack)
    if callers and callers[-1].name == code_name:  # the frame being compiled: not its caller
        callers.pop()
    harness = False
    for i in range(len(callers) - 1, -1, -1):
        f = callers[i]
        if passes_through(f):
            harness = harness or (
                owner_of(f.file) == Owner.COMPILEDIAG and PROBE_PATH not in f.file
            )
            continue
        if owner_of(f.file) == Owner.USER:
            if harness:  # compilediag's call with the inputs a test of the user's gave it
                return Caller(CalledBy.HARNESS, loop=loop)
            return Caller(CalledBy.USER, f, "", f, (), loop)
        package = installed_package(f.file)
        user_at = next(
            (k for k in range(i - 1, -1, -1) if owner_of(callers[k].file) == Owner.USER), -1
        )
        user = callers[user_at] if user_at >= 0 else None
        through = tuple(k for k in callers[user_at + 1 : i + 1] if not passes_through(k))
        # a package that runs code not its own (the user's model, torch's wrapper of it)
        if framework_name(f.file) or package != code_package:
            return Caller(CalledBy.FRAMEWORK, f, package, user, through, loop or package)
        return Caller(CalledBy.LIBRARY, f, package, user, through, loop)
    return Caller(CalledBy.HARNESS if harness else CalledBy.UNKNOWN, loop=loop)
