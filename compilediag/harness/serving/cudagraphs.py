"""CUDA graphs under a mode that records them (`reduce-overhead`, `max-autotune`): what
torch's CUDA graph trees hold (`torch._inductor.cudagraph_trees`' manager for the device):
the functions it was given (one per Inductor graph and input sizes: a dynamic graph's every
size is a function of its own), those that ran their warm-up (a size's first call runs
without a CUDA graph), the graphs recorded (its second call), re-records, the private
pool's memory, torch's count of graphs it skipped. Read, never changed."""

from __future__ import annotations

from collections import Counter
from typing import Any

from compilediag.report.serving import GraphState

# torch.compile's modes whose Inductor graphs run as CUDA graphs (on a CUDA device)
CUDAGRAPH_MODES = ("reduce-overhead", "max-autotune")


def records_cuda_graphs(compile_kwargs: dict[str, Any], device: str) -> bool:
    return device.startswith("cuda") and compile_kwargs.get("mode") in CUDAGRAPH_MODES


def graph_state(torch: Any, memory: bool = True) -> GraphState:
    """The manager's state now (all zero where it has recorded nothing yet); `memory`: read
    the pool's size too (the allocator's snapshot: not between two requests)."""
    from torch._inductor import cudagraph_trees as trees

    mgr = trees.get_container(torch.cuda.current_device()).tree_manager
    skipped = int(torch._dynamo.utils.counters["inductor"]["cudagraph_skips"])
    if mgr is None:
        return GraphState(skipped=skipped)
    nodes: list[Any] = []
    todo = [n for roots in mgr.roots.values() for n in roots]
    while todo:
        node = todo.pop()
        nodes.append(node)
        todo += [c for children in node.children.values() for c in children]
    sizes = Counter(str(mgr.id_to_compile_id.get(f, "")) for f in mgr.ids_to_funcs)
    pool = tuple(mgr.cuda_graphs_thread_pool)
    reserved = (
        sum(
            s["total_size"]
            for s in torch.cuda.memory_snapshot()
            if tuple(s.get("segment_pool_id", ())) == pool
        )
        if memory
        else 0
    )
    return GraphState(
        recorded=len(nodes),
        sizes=len(mgr.ids_to_funcs),
        warmed=len(mgr.warmed_up_functions),
        rerecords=_count(mgr.num_rerecord),
        pool_mb=round(reserved / 2**20, 1),
        skipped=skipped,
        by_graph={k: v for k, v in sizes.items() if k},
    )


def _count(rerecords: Any) -> int:
    """torch's re-record counts, per graph and per function (nested dicts of ints)."""
    if isinstance(rerecords, dict):
        return sum(_count(v) for v in rerecords.values())
    return int(rerecords)


def reset(torch: Any) -> None:
    """A fresh manager (a plan's own compile records its own graphs)."""
    from torch._inductor import cudagraph_trees as trees

    trees.reset_cudagraph_trees()
