"""The float64 reference (the model and its inputs in float64, eager), and the random ops a
call draws from, each at the user's line (torch tags them `nondeterministic_seeded`)."""

from __future__ import annotations

import contextlib
import copy
import linecache
import traceback
from collections.abc import Callable, Iterator
from typing import Any

from compilediag.harness.checks import map_tensors
from compilediag.paths import Owner, is_library_file, owner_of
from compilediag.report.numerics import RandomOp


def in_float64(torch: Any, obj: Any) -> Any:
    """A call's inputs with each floating tensor in float64 (the rest as they are)."""
    return map_tensors(torch, obj, lambda t: t.detach().double() if t.is_floating_point() else t)


@contextlib.contextmanager
def default_float64(torch: Any) -> Iterator[None]:
    """Tensors the model makes itself (torch.zeros(n)) in float64 too."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


def user_site() -> tuple[str, int, str]:
    """The innermost frame of code the user wrote on the stack now; inside a library's
    model (transformers), the innermost frame of that library (torch's and ours never)."""
    frames = list(reversed(traceback.extract_stack()[:-1]))
    mine = [f for f in frames if not is_library_file(f.filename)]
    theirs = [f for f in frames if owner_of(f.filename) == Owner.LIBRARY]
    for f in (mine or theirs)[:1]:
        line = f.line or linecache.getline(f.filename, f.lineno or 0).strip()
        return f.filename, f.lineno or 0, line
    return "", 0, ""


def draws(func: Any, args: tuple, kwargs: dict) -> bool:
    """Whether a call of an op torch tags as random draws any number: attention with
    dropout_p=0 and dropout at p=0 or outside training do not."""
    try:
        schema = func._schema.arguments
    except AttributeError:
        return True
    defaults = {a.name: a.default_value for a in schema if a.has_default_value()}
    given = {**defaults, **dict(zip([a.name for a in schema], args, strict=False)), **kwargs}
    if "dropout_p" in given:
        return bool(given["dropout_p"])
    if "p" in given and "train" in given:
        return bool(given["train"]) and bool(given["p"])
    return True


def random_op_recorder(torch: Any) -> tuple[Any, dict[tuple[str, str, int], RandomOp]]:
    """A dispatch mode that records each random op a call runs, where it is called (by op
    and line)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    seen: dict[tuple[str, str, int], RandomOp] = {}
    tag = torch.Tag.nondeterministic_seeded

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            if tag in getattr(func, "tags", ()) and draws(func, args, kwargs or {}):
                name = str(func.overloadpacket).replace("aten::", "aten.")
                file, line, code = user_site()
                op = seen.setdefault((name, file, line), RandomOp(name, file, line, code))
                op.calls += 1
            return func(*args, **(kwargs or {}))

    return Recorder(), seen


def float64_run(
    torch: Any, model: Any, call: Any, run: Callable[[Any, Any], Any], device: str
) -> tuple[Any, list[RandomOp], str]:
    """The model in float64 on the call (its outputs, or None with why), and the random ops
    the call ran."""
    recorder, random_ops = random_op_recorder(torch)
    if device.startswith("cuda") and isinstance(model, torch.nn.Module):
        need = 2 * sum(p.numel() * 8 for p in model.parameters())
        free, _ = torch.cuda.mem_get_info()
        if need > free:
            return (
                None,
                [],
                f"no float64 reference: the model in float64 needs {need / 2**30:.1f} GiB, {free / 2**30:.1f} GiB free",
            )
    try:
        twin = copy.deepcopy(model) if isinstance(model, torch.nn.Module) else model
        if isinstance(twin, torch.nn.Module):
            twin = twin.to(torch.float64)
        args = in_float64(torch, call)
        with torch.no_grad(), default_float64(torch), recorder:
            out = run(twin, args)
        return out, list(random_ops.values()), ""
    except Exception as e:  # an op without float64, a dtype the model fixes itself
        first = (str(e).strip().splitlines() or [""])[0][:200]
        return (
            None,
            list(random_ops.values()),
            f"no float64 reference: the model does not run in float64 ({type(e).__name__}: {first})",
        )
