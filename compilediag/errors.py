"""Errors that carry the exit code the CLI ends with.

Every failure a user can cause ends as one of these, printed as one short paragraph
(what went wrong, what to do) - never as a traceback of compilediag itself.
"""

from __future__ import annotations

OK = 0
GATE_FAILED = 1
USAGE = 2
MODEL_FAILED = 3
COMPILE_FAILED = 4
WORKER_FAILED = 5
JOB_FAILED = 6  # `compilediag run`: the command itself failed (its report is still given)
INTERRUPTED = 130

EXIT_CODES_HELP = (
    "Exit codes: 0 ran, gate passed; 1 ran, gate failed (graph break under --fullgraph, "
    "budget exceeded); 2 usage error (bad option, file not found, no model or inputs); "
    "3 the model failed in eager mode; 4 torch.compile failed on the model; "
    "5 the worker crashed or timed out; 6 (run) the command itself failed; 130 interrupted (Ctrl-C), 143 terminated (SIGTERM)."
)


class DiagError(Exception):
    """A failure with a message for the user and an exit code."""

    exit_code = WORKER_FAILED

    def __init__(self, message: str, hint: str = "", detail: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        # e.g. the user's own traceback frame, or the tail of the worker's output
        self.detail = detail

    def render(self) -> str:
        parts = [f"error: {self.message}"]
        if self.detail:
            parts.append(self.detail.rstrip())
        if self.hint:
            parts.append(self.hint)
        return "\n".join(parts)


class UsageError(DiagError):
    exit_code = USAGE


def does_not_parse(path: object, line: object, message: str, what: str) -> UsageError:
    """A file that is no Python, where it stops parsing, and the fix (`what`: what
    compilediag does with the file)."""
    return UsageError(
        f"{path} does not parse: line {line}: {message}",
        hint=f"Fix the syntax error first; {what}.",
    )


class ModelError(DiagError):
    exit_code = MODEL_FAILED


class WorkerError(DiagError):
    exit_code = WORKER_FAILED
