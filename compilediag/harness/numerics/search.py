"""Where a difference starts: the first graph that departs from eager, the first backend
stage that shows it, the first op whose output departs while its inputs agree (and the
first that makes a NaN or inf eager does not), torch's opcheck on the custom ops, and its
CompilerBisector where it has one."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from typing import Any

from compilediag.harness.checks import tensors_of
from compilediag.harness.numerics.closeness import judge, judge_all
from compilediag.harness.numerics.graphs import (
    Captured,
    compiled_run,
    custom_op,
    cut,
    run_eager,
    site,
    tensor_nodes,
)
from compilediag.report.numerics import DIFFER, NodeSite, OpCheck

SEED = 1234

# what each of opcheck's tests says is wrong with an op, in words
OPCHECK_CAUSES = {
    "test_schema": "changes an input, or returns an alias of one, that its schema does not "
    "declare (mutates_args)",
    "test_faketensor": "its fake kernel does not give what the op gives (shape, dtype or "
    "strides): compiled code is planned for the wrong tensor",
    "test_autograd_registration": "its autograd formula is not registered the way "
    "torch.library asks (register_autograd)",
    "test_aot_dispatch_static": "it does not trace under AOTAutograd",
    "test_aot_dispatch_dynamic": "it does not trace under AOTAutograd with dynamic shapes",
}


class GraphCheck:
    """One captured graph against eager: its nodes' eager and float64 values, and each
    cut of it compiled by a stage, judged (cached: each cut compiles once)."""

    def __init__(self, torch: Any, g: Captured, use_ref: bool, backend: str) -> None:
        self.torch, self.g, self.backend = torch, g, backend
        g.values = run_eager(torch, g, SEED)
        self.ref = run_eager(torch, g, SEED, float64=True) if use_ref else {}
        self.nodes = tensor_nodes(torch, g)
        self._seen: dict[tuple[str, tuple[str, ...], bool], list[Any]] = {}

    def outputs(self) -> list[str]:
        """The names of the output's tensor nodes, in order."""
        out = next(n for n in self.g.gm.graph.nodes if n.op == "output")
        names: list[str] = []
        self.torch.fx.node.map_arg(out.args, lambda n: names.append(n.name))
        known = {n.name for n in self.nodes}
        return [x for x in dict.fromkeys(names) if x in known]

    def judged(self, stage: str, names: list[str], cached: bool | None = None) -> list[Any]:
        """Each named node's value compiled by `stage`, judged. The whole graph under the
        run's backend is the run's own compile, read back from torch's caches (`cached`
        None): on a GPU a first compile in a process can differ from a later one of the
        same graph. Every other cut is compiled afresh, writing no cache of the user's."""
        if cached is None:
            cached = stage == self.backend and names == self.outputs()
        key = (stage, tuple(names), cached)
        if key not in self._seen:
            torch, g = self.torch, self.g
            got = compiled_run(torch, cut(torch, g.gm, names), g.inputs or [], stage, SEED, cached)
            self._seen[key] = [
                judge(torch, x, g.values[x], y, self.ref.get(x))
                for x, y in zip(names, tensors_of(torch, got), strict=False)
            ]
        return self._seen[key]

    def departs(self, stage: str, names: list[str], cached: bool | None = None) -> bool:
        return any(j.verdict == DIFFER for j in self.judged(stage, names, cached))

    def makes_nonfinite(self, stage: str, name: str) -> bool:
        return any(j.nonfinite.startswith("compiled") for j in self.judged(stage, [name]))


def first_graph(checks: list[GraphCheck], stage: str) -> GraphCheck | None:
    """The first graph (in the order the run compiled them) whose outputs depart."""
    for c in checks:
        names = c.outputs()
        if names and c.departs(stage, names):
            return c
    return None


def first_stage(c: GraphCheck, stages: list[str]) -> str:
    """The first stage whose compile of the graph departs from eager ("" none)."""
    names = c.outputs()
    return next((s for s in stages if c.departs(s, names)), "")


def _first(c: GraphCheck, bad: Callable[[int], bool], hi: int) -> int:
    """The first index in [0, hi] that is bad, hi being bad (a departure stays departed
    downstream, so halving finds it)."""
    lo = 0
    while lo < hi:
        mid = (lo + hi) // 2
        if bad(mid):
            hi = mid
        else:
            lo = mid + 1
    return hi


def first_node(c: GraphCheck, stage: str, nonfinite: bool = False) -> NodeSite | None:
    """The first op whose compiled output departs (or, `nonfinite`, makes a NaN or inf
    eager does not) while its inputs agree."""
    index = {n.name: i for i, n in enumerate(c.nodes)}

    def bad(i: int) -> bool:
        name = c.nodes[i].name
        return c.makes_nonfinite(stage, name) if nonfinite else c.departs(stage, [name])

    ends = [index[x] for x in c.outputs() if bad(index[x])]
    if not ends:
        return None
    hi = min(ends)
    for _ in range(4):  # an input found departed: look again before it
        i = _first(c, bad, hi)
        node = c.nodes[i]
        inputs = [a.name for a in node.all_input_nodes if a.name in index]
        gone = [x for x in inputs if c.departs(stage, [x])]
        if not gone:
            break
        hi = min(index[x] for x in gone)
    out = site(c.g, node)
    j = c.judged(stage, [node.name])[0]
    out.compiled_vs_eager, out.tolerance = j.compiled_vs_eager, j.tolerance
    out.inputs_agree = not gone
    if j.nonfinite.startswith("compiled"):
        out.makes = "NaN" if "NaN" in j.nonfinite else "inf"
    return out


def eager_nonfinite(torch: Any, c: GraphCheck) -> NodeSite | None:
    """The first op where eager makes a NaN or inf that float64 does not, its inputs finite."""
    for n in c.nodes:
        v, r = c.g.values[n.name], c.ref.get(n.name)
        if r is None or r.shape != v.shape or bool(v.isfinite().all()):
            continue
        made = ~v.isfinite() & r.isfinite()
        inputs = [c.g.values.get(a.name) for a in n.all_input_nodes]
        if bool(made.any()) and all(
            not isinstance(x, torch.Tensor) or not x.is_floating_point() or bool(x.isfinite().all())
            for x in inputs
        ):
            out = site(c.g, n)
            out.makes = "NaN" if bool((made & v.isnan()).any()) else "inf"
            return out
    return None


def opchecks(torch: Any, checks: list[GraphCheck]) -> list[OpCheck]:
    """torch.library.opcheck on each custom op of the graphs, with the values eager gave it."""
    found: list[OpCheck] = []
    done: set[str] = set()
    for c in checks:
        for n in c.g.gm.graph.nodes:
            op = custom_op(n)
            name = str(op.overloadpacket).replace("::", ".") if op is not None else ""
            if op is None or name in done:
                continue
            done.add(name)
            value = lambda a, c=c: c.g.values.get(a.name)  # noqa: E731
            args = torch.fx.node.map_arg(n.args, value)
            kwargs = torch.fx.node.map_arg(n.kwargs, value)
            args = torch.utils._pytree.tree_map(
                lambda t: t.clone() if isinstance(t, torch.Tensor) else t, args
            )
            try:
                results = torch.library.opcheck(op, args, kwargs, raise_exception=False)
            except Exception as e:  # opcheck itself could not run the op
                found.append(
                    OpCheck(name, message=f"opcheck did not run: {type(e).__name__}: {e}"[:300])
                )
                continue
            failed = [(t, r) for t, r in results.items() if r != "SUCCESS"]
            if not failed:
                found.append(OpCheck(name))
            for test, err in failed:
                text = (str(err).strip().splitlines() or [""])[0][:300]
                found.append(OpCheck(name, test, OPCHECK_CAUSES.get(test, test), text))
    return found


def bisector(torch: Any, c: GraphCheck) -> str:
    """torch's CompilerBisector on the graph (inductor): its subsystem and the pass or
    lowering number ("" where this torch has none or it finds none)."""
    try:
        from torch._inductor.compiler_bisector import CompilerBisector
    except ImportError:
        return ""
    names = c.outputs()
    g = c.g

    def passes() -> bool:
        try:
            got = compiled_run(torch, cut(torch, g.gm, names), g.inputs or [], "inductor", SEED)
        except Exception:  # a compile that fails under a bisected setting fails the test
            return False
        return not any(
            j.verdict == DIFFER
            for j in judge_all(torch, tensors_of, [g.values[x] for x in names], got,
                               [c.ref[x] for x in names] if all(x in c.ref for x in names) else None)
        )  # fmt: skip

    try:
        with contextlib.redirect_stdout(io.StringIO()):
            result = CompilerBisector.do_bisect(passes)
    except Exception:  # torch's bisector is a debugging aid: its failure is no finding
        return ""
    if result is None or not result.subsystem:
        return ""
    words = f"{result.backend}: {result.subsystem}"
    if result.bisect_number:
        words += f" #{result.bisect_number}"
    if result.debug_info and result.debug_info != result.subsystem:
        words += f" ({result.debug_info})"
    return words
