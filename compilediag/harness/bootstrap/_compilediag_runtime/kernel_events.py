"""The kernel profile's events read: which op launched a kernel, an op's shapes and dtype,
whether it ran inside a compiled graph or at a step's top (kernel_window.py reads the
profile with them)."""

from __future__ import annotations

from typing import Any

GRAPH_CALL = "## Call CompiledFxGraph"  # Inductor's record_function around a graph's call
# a tensor's value read in Python: on CUDA a wait for the device where the tensor is there
# (a `Memcpy DtoH` under it), else a read of host memory that waits for nothing
VALUE_READS = ("aten::item", "aten::_local_scalar_dense", "aten::is_nonzero")


def _launched(events: Any) -> tuple[dict[int, Any], dict[int, int]]:
    """The op that launched each CUDA kernel (torch lists a kernel under its op, by name and
    time), by the kernel event's id; and for each library call a graph made, its longest
    kernel (the one its FLOPs are given to)."""
    from torch.autograd import DeviceType

    launches: dict[tuple[str, float], list[Any]] = {}
    for op in events:
        if op.device_type == DeviceType.CPU:
            for k in getattr(op, "kernels", None) or []:
                launches.setdefault((k.name, k.duration), []).append(op)
    launched_by: dict[int, Any] = {}
    longest: dict[int, tuple[float, int]] = {}
    for e in events:
        if e.device_type != DeviceType.CUDA:
            continue
        ops = launches.get((e.name, e.time_range.end - e.time_range.start))
        if ops:
            launched_by[id(e)] = ops.pop(0)
            call = _library_call(launched_by[id(e)])
            took = e.time_range.end - e.time_range.start
            if call is not None and took > longest.get(call.id, (-1.0, 0))[0]:
                longest[call.id] = (took, id(e))
    return launched_by, {call: e for call, (_, e) in longest.items()}


def _dtype(e: Any) -> str:
    """The dtype of a library call's first tensor input, as torch.profiler names it (`float`,
    `c10::BFloat16`); '' where this torch does not record it."""
    return next((str(t) for t in getattr(e, "input_dtypes", None) or [] if t), "")


def _shapes(e: Any) -> str:
    return ", ".join(str(list(s)) for s in (e.input_shapes or []) if s)


def _library_call(op: Any) -> Any:
    """The aten op a compiled graph called that launched a kernel (from the op that
    launched it, up through the aten ops that called it); None outside a graph."""
    if op is None or not op.name.startswith("aten::"):
        return None
    while op.cpu_parent is not None and op.cpu_parent.name.startswith("aten::"):
        op = op.cpu_parent
    return op if _in_graph(op) else None


def _top_kind(e: Any, cuda: bool) -> str:
    """An op the step ran at its top: on CUDA, a copy to the device, or a value read of a
    host tensor (no wait for the device); else eager."""
    if cuda and _copies(e, "HtoD"):
        return "to_device"
    if cuda and e.name.startswith(VALUE_READS) and not _copies(e, "DtoH"):
        return "host_read"
    return "eager"


def _copies(op: Any, way: str) -> bool:
    """An op that copied memory `way` (HtoD: host to device; DtoH: back; a `Memcpy HtoD`
    under it)."""
    todo = [op]
    while todo:
        e = todo.pop()
        if any(way in k.name for k in getattr(e, "kernels", None) or []):
            return True
        todo += list(getattr(e, "cpu_children", None) or [])
    return False


def _covered(spans: list[tuple[float, float]]) -> float:
    """The time (us) at least one of the spans covers."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def _in_graph(e: Any) -> bool:
    """An aten op called by a compiled graph itself (not by another aten op)."""
    p = e.cpu_parent
    if p is None or p.name.startswith("aten::"):
        return False
    while p is not None:
        if p.name.startswith(GRAPH_CALL):
            return True
        p = p.cpu_parent
    return False


def _outermost_op(e: Any) -> bool:
    """CPU compute: an op or generated kernel no other op called (not a range around them,
    FSDP's hooks' or the job's record_function, which also hold waits for other ranks)."""
    if not e.name.startswith(("aten::", "cpp_fused")):
        return False
    p = e.cpu_parent
    while p is not None:
        if p.name.startswith(("aten::", "cpp_fused")):
            return False
        p = p.cpu_parent
    return True
