"""The graphs Dynamo hands a backend, each with the inputs the run gave it; one graph run
eagerly node by node (each node's value kept), cut after chosen nodes, and compiled with a
backend stage by itself."""

from __future__ import annotations

import copy
import linecache
from dataclasses import dataclass, field
from typing import Any

from compilediag.harness.checks import fresh
from compilediag.harness.numerics.reference import default_float64, in_float64
from compilediag.paths import is_library_file
from compilediag.report.numerics import NodeSite
from compilediag.trace.formats import STACK_FILE_LINE

# a custom op is one outside torch's own namespaces
TORCH_NAMESPACES = frozenset(
    ("aten", "prims", "prim", "_c10d_functional", "c10d_functional", "inductor", "higher_order",
     "profiler", "debugprims", "rngprims", "quantized", "_quantized", "quantized_decomposed",
     "mkldnn", "onednn", "_dtensor", "symm_mem", "streams", "_C")
)  # fmt: skip


@dataclass
class Captured:
    index: int
    gm: Any
    inputs: list[Any] | None = None  # as the first call gave them, cloned
    values: dict[str, Any] = field(default_factory=dict)  # node -> eager value (run_eager)


def clone(torch: Any, inputs: list[Any]) -> list[Any]:
    return [a.detach().clone() if isinstance(a, torch.Tensor) else a for a in inputs]


def capture(torch: Any, model: Any, call: Any, run: Any) -> list[Captured]:
    """Each graph the model compiles to on the call, with the inputs it was called with (a
    graph the call does not reach keeps None)."""
    graphs: list[Captured] = []

    def backend(gm: Any, example_inputs: Any) -> Any:
        entry = Captured(len(graphs), gm)
        graphs.append(entry)

        def first_call(*args: Any) -> Any:
            if entry.inputs is None:
                entry.inputs = clone(torch, list(args))
            return gm(*args)

        return first_call

    torch._dynamo.reset()
    run(torch.compile(model, backend=backend), fresh(call))
    torch._dynamo.reset()
    return [g for g in graphs if g.inputs is not None]


def op_name(node: Any) -> str:
    t = node.target
    if node.op == "call_method":
        return f"Tensor.{t}"
    if node.op == "call_module":
        return str(t)
    if hasattr(t, "overloadpacket"):  # an OpOverload: aten.sinh.default
        return str(t.overloadpacket).replace("::", ".")
    module = getattr(t, "__module__", None) or ""
    name = getattr(t, "__name__", str(t))
    module = {"torch._C._nn": "torch.nn.functional", "_operator": "operator"}.get(module, module)
    return f"{module}.{name}" if module and module != "builtins" else name


def custom_op(node: Any) -> Any | None:
    """The node's op where it is a custom op (torch.library), else None."""
    t = node.target
    ns = getattr(t, "namespace", None)
    return t if node.op == "call_function" and ns and ns not in TORCH_NAMESPACES else None


def site(g: Captured, node: Any) -> NodeSite:
    """The node at the user's line (the innermost frame of theirs in its stack trace)."""
    out = NodeSite(g.index, node.name, op_name(node))
    frames = [
        (m["file"], int(m["line"]))
        for m in STACK_FILE_LINE.finditer(node.meta.get("stack_trace") or "")
    ]
    mine = [(f, n) for f, n in frames if not is_library_file(f)] or frames
    if mine:
        out.file, out.line = mine[-1]
        out.code = linecache.getline(out.file, out.line).strip()
    return out


def tensor_nodes(torch: Any, g: Captured) -> list[Any]:
    """The nodes, in order, whose eager value is a floating tensor (what can depart)."""
    return [
        n for n in g.gm.graph.nodes
        if n.op in ("call_function", "call_method", "call_module")
        and isinstance(g.values.get(n.name), torch.Tensor)
        and g.values[n.name].is_floating_point()
    ]  # fmt: skip


def run_eager(torch: Any, g: Captured, seed: int, float64: bool = False) -> dict[str, Any]:
    """Every node's value, the graph run eagerly (each value kept as it was made: a later op
    that changes it in place does not reach the copy); in float64 where asked (a graph
    that can't: {})."""
    values: dict[str, Any] = {}

    class Keep(torch.fx.Interpreter):
        def run_node(self, n: Any) -> Any:
            out = super().run_node(n)
            if isinstance(out, torch.Tensor):
                values[n.name] = out.detach().clone()
            return out

    inputs = clone(torch, g.inputs or [])
    gm = g.gm
    try:
        torch.manual_seed(seed)
        if float64:
            gm = copy.deepcopy(gm).to(torch.float64)
            with default_float64(torch):
                Keep(gm).run(*in_float64(torch, inputs))
        else:
            Keep(gm).run(*inputs)
    except Exception:
        if float64:
            return {}
        raise
    return values


def cut(torch: Any, gm: Any, names: list[str]) -> Any:
    """The graph up to the last of the named nodes, returning those (a tuple)."""
    graph = torch.fx.Graph()
    env: dict[Any, Any] = {}
    wanted = set(names)
    for n in gm.graph.nodes:
        if n.op == "output":
            break
        env[n] = graph.node_copy(n, lambda a: env[a])
        wanted.discard(n.name)
        if not wanted:
            break
    by_name = {n.name: env[n] for n in env}
    graph.output(tuple(by_name[x] for x in names))
    return torch.fx.GraphModule(gm, graph)


def compiled_run(
    torch: Any, gm: Any, inputs: list[Any], stage: str, seed: int, cached: bool = False
) -> Any:
    """The graph compiled by `stage` (Dynamo over it, as torch's repros do), run once;
    `cached`: read torch's caches, where the run's own compile of this very graph is (a
    hit writes nothing), else compile afresh."""
    torch._dynamo.reset()
    fn = torch.compile(copy.deepcopy(gm), backend=stage)
    torch.manual_seed(seed)
    with torch._inductor.config.patch(force_disable_caches=not cached):
        out = fn(*clone(torch, inputs))
    torch._dynamo.reset()
    return out


def eager_outputs(torch: Any, g: Captured, seed: int) -> Any:
    torch.manual_seed(seed)
    return g.gm(*clone(torch, g.inputs or []))
