"""A stream of requests: one JSON object a line, `{"shapes": [[1, 37], [1, 37]]}`, the
shapes of the call's tensors in order (positional, then keyword), `null` for one kept as
get_inputs() gives it; fewer shapes than tensors keep the rest. Read and checked before
any run (a bad line is named with its number); or the model file's get_request_stream(),
which yields the same objects (read in the worker)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from compilediag.errors import UsageError

Shapes = list[list[int] | None]  # one request: a shape, or None, for each tensor in order

EXAMPLE = '{"shapes": [[1, 37]]}'
FIT_SHARE = 0.7  # the stream's first part the plans are fitted to; the rest checks them
FEWEST_HELD_OUT = 5


def read_requests(path: str) -> list[Shapes]:
    """The stream in FILE, checked line by line; UsageError names the first bad line."""
    file = Path(path)
    if not file.is_file():
        raise UsageError(
            f"--requests {path}: no such file.",
            hint=f"Write one request a line, e.g. {EXAMPLE}.",
        )
    out: list[Shapes] = []
    for n, line in enumerate(file.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as e:
            raise UsageError(
                f"--requests {path}, line {n}: not JSON ({e.msg}).",
                hint=f"Write one request a line, e.g. {EXAMPLE}.",
            ) from None
        out.append(as_request(value, f"--requests {path}, line {n}"))
    if not out:
        raise UsageError(f"--requests {path} holds no request.", hint=f"Add lines like {EXAMPLE}.")
    return out


def as_request(value: Any, where: str) -> Shapes:
    """One request's shapes, from its JSON object (or get_request_stream()'s item)."""
    shapes = value.get("shapes") if isinstance(value, dict) else None
    if not isinstance(shapes, list) or not shapes:
        raise UsageError(
            f"{where}: a request is an object with a list of shapes, not {str(value)[:60]!r}.",
            hint=f"Write it as {EXAMPLE}.",
        )
    out: Shapes = []
    for s in shapes:
        if s is None:
            out.append(None)
        elif isinstance(s, list) and all(isinstance(d, int) and d >= 0 for d in s):
            out.append(list(s))
        else:
            raise UsageError(
                f"{where}: shape {s!r} is not a list of sizes.",
                hint="Each shape is a list of non-negative integers, or null to keep the input.",
            )
    return out


def key(request: Shapes) -> str:
    """A request's shapes as one key: requests with the same key are the same shapes."""
    return json.dumps(request)


def distinct(stream: list[Shapes]) -> list[int]:
    """The positions (0-based) of each distinct request's first occurrence, in order."""
    seen: set[str] = set()
    out = []
    for i, r in enumerate(stream):
        if (k := key(r)) not in seen:
            seen.add(k)
            out.append(i)
    return out


def fitted_part(requests: int) -> int:
    """How many of the stream's first requests the plans are fitted to: 70% of them, the
    rest held out to check each plan on requests it was not made from (a stream of fewer
    than FEWEST_HELD_OUT requests is fitted whole: nothing to hold out)."""
    if requests < FEWEST_HELD_OUT:
        return requests
    return min(requests - 1, max(1, round(FIT_SHARE * requests)))


def once_shapes(stream: list[Shapes]) -> int:
    """The requests whose shape comes exactly once: over the stream's length, the
    Good-Turing estimate of the chance that the next request brings a shape not seen."""
    counts = Counter(key(r) for r in stream)
    return sum(1 for n in counts.values() if n == 1)


def described(request: Shapes) -> str:
    return ", ".join("as given" if s is None else "x".join(map(str, s)) for s in request)
