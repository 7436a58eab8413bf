"""What a call does besides taking time, checked in the worker: each variant's own copy of
the inputs, the inputs a call changed, compiled's outputs against eager's (within the
dtype's tolerance); and the device waited for. torch is passed in, never imported."""

from __future__ import annotations

import copy
import inspect
from collections.abc import Iterator
from typing import Any

from compilediag.harness.numerics.closeness import strided, table_tolerance
from compilediag.harness.worker_types import (
    OutputCheck,
)


def fresh(obj: Any) -> Any:
    """A deep copy of a call's inputs (tensors, and objects such as a KV cache); the
    object itself when it can't be copied."""
    try:
        return copy.deepcopy(obj)
    except Exception:
        return obj


def _leaves(torch: Any, obj: Any, path: str, depth: int = 0) -> Iterator[tuple[str, Any]]:
    """Every tensor reachable from an input, with where it sits; objects (a cache) are
    walked through their attributes, a few levels deep."""
    if isinstance(obj, torch.Tensor):
        yield path, obj
    elif depth > 4:
        return
    elif isinstance(obj, (tuple, list)):
        yield path + ".len", len(obj)
        for i, o in enumerate(obj):
            yield from _leaves(torch, o, f"{path}[{i}]", depth + 1)
    elif isinstance(obj, dict):
        for k, o in obj.items():
            yield from _leaves(torch, o, f"{path}[{k!r}]", depth + 1)
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        for k, o in vars(obj).items():
            yield from _leaves(torch, o, f"{path}.{k}", depth + 1)


def changed_inputs(torch: Any, model: Any, before: Any, after: Any) -> list[str]:
    """The inputs a call changed, by the names forward gives them."""
    names: list[str] = []
    try:
        bound = inspect.signature(model.forward if hasattr(model, "forward") else model)
        params = list(bound.parameters)
    except (TypeError, ValueError):
        params = []
    (args_b, kwargs_b), (args_a, kwargs_a) = before, after
    pairs = [(params[i] if i < len(params) else f"args[{i}]", b, a)
             for i, (b, a) in enumerate(zip(args_b, args_a, strict=False))]  # fmt: skip
    pairs += [(k, kwargs_b[k], kwargs_a[k]) for k in kwargs_b if k in kwargs_a]
    for name, b, a in pairs:
        lb, la = dict(_leaves(torch, b, name)), dict(_leaves(torch, a, name))
        same = lb.keys() == la.keys() and all(_same(torch, lb[k], la[k]) for k in lb)
        if not same:
            names.append(name)
    return names


def _same(torch: Any, a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape or a.dtype != b.dtype or a.layout != b.layout:
            return False
        return bool(torch.equal(strided(torch, a), strided(torch, b)))
    return bool(a == b)


def tensors_of(torch: Any, obj: Any) -> list:
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (tuple, list)):
        return [t for o in obj for t in tensors_of(torch, o)]
    if isinstance(obj, dict):
        return [t for o in obj.values() for t in tensors_of(torch, o)]
    for attr in ("to_tuple",):  # e.g. transformers' ModelOutput
        if hasattr(obj, attr):
            return tensors_of(torch, obj.to_tuple())
    return []


def sync(torch: Any, device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def compare_outputs(torch: Any, eager: Any, compiled: Any) -> OutputCheck:
    a, b = tensors_of(torch, eager), tensors_of(torch, compiled)
    if len(a) != len(b):
        return OutputCheck(0, mismatch=True, note=f"{len(a)} vs {len(b)} output tensors")
    max_abs = max_rel = 0.0
    mismatch = False
    for x, y in zip(a, b, strict=True):
        x, y = strided(torch, x), strided(torch, y)
        if x.shape != y.shape:
            return OutputCheck(len(a), mismatch=True, note="output shapes differ")
        if not x.is_floating_point():
            mismatch |= not torch.equal(x, y)
            continue
        atol, rtol = table_tolerance(str(x.dtype))
        x, y = x.detach().double(), y.detach().double()
        # a NaN (or an infinity) where the other has the same is equal; NaN against a
        # number is not, and its error is NaN
        diff = (x - y).abs().masked_fill((x == y) | (x.isnan() & y.isnan()), 0)
        if diff.numel():
            worst = float(diff.max())
            max_abs = worst if worst != worst else max(max_abs, worst)  # NaN stays
            max_rel = max(max_rel, float((diff / x.abs().clamp_min(1e-12)).nan_to_num().max()))
        mismatch |= not torch.allclose(x, y, atol=atol, rtol=rtol, equal_nan=True)
    return OutputCheck(len(a), max_abs, max_rel, mismatch)


def map_tensors(torch: Any, obj: Any, fn: Any, kinds: tuple = ()) -> Any:
    """`obj` with `fn` applied to each tensor (or each of `kinds`) in its tuples, lists and
    dicts; the rest as it is."""
    if isinstance(obj, kinds or (torch.Tensor,)):
        return fn(obj)
    if isinstance(obj, tuple):
        return tuple(map_tensors(torch, o, fn, kinds) for o in obj)
    if isinstance(obj, list):
        return [map_tensors(torch, o, fn, kinds) for o in obj]
    if isinstance(obj, dict):
        return {k: map_tensors(torch, o, fn, kinds) for k, o in obj.items()}
    return obj
