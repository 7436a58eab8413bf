"""The numerics section of a report: the worker's judgment of compiled against eager and
float64, with the kernel that computes the first op that departs (from the run's own
kernels) and the verdict in words."""

from __future__ import annotations

from compilediag.paths import short_path
from compilediag.report.model import Kernel
from compilediag.report.numerics import (
    COMPILED_CLOSER,
    DIFFER,
    MATCH,
    NOT_COMPARED,
    RANDOM_ONLY,
    NodeSite,
    Numerics,
)

SHOWN = 3  # random ops named in the sentence (the JSON has each)


def kernel_of(kernels: list[Kernel], at: NodeSite) -> str:
    """The Inductor kernel that holds the op's line (and its op, where several do)."""
    where = f"{at.file}:{at.line}"
    holding = [k for k in kernels if where in k.source_lines]
    op = at.op.rpartition(".")[2]
    named = [k for k in holding if any(o.rpartition(".")[2] == op for o in k.ops)]
    return (named or holding)[0].name if (named or holding) else ""


def _err(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def at_words(at: NodeSite) -> str:
    where = f"{short_path(at.file)}:{at.line}" if at.file else f"graph {at.graph}"
    code = f" `{at.code}`" if at.code else ""
    kernel = f" (kernel {at.kernel})" if at.kernel else ""
    return f"{at.op} at {where}{code}{kernel}"


def words(n: Numerics) -> str:
    """The verdict in one or two sentences."""
    worst = max(
        (o for o in n.outputs if o.compiled_vs_eager is not None),
        key=lambda o: o.compiled_vs_eager or 0.0, default=None,
    )  # fmt: skip
    err = _err(worst.compiled_vs_eager if worst else None)
    tol = f", tolerance {_err(worst.tolerance)} from the {n.tolerance_from}" if worst else ""
    measured = f" (max abs err {err}{tol})" if worst else ""
    checked = [
        f"custom op {c.op} {c.cause} (torch.library.opcheck: {c.test})" for c in n.opcheck if c.test
    ]
    if n.verdict == NOT_COMPARED:
        return "outputs not compared: the compile failed; " + "; ".join(checked)
    if n.verdict == MATCH:
        return f"outputs match eager{measured}"
    if n.verdict == COMPILED_CLOSER:
        o = next(o for o in n.outputs if o.verdict == COMPILED_CLOSER)
        text = (
            f"compiled is closer to float64 than eager ({o.name}: {_err(o.compiled_vs_float64)} "
            f"against eager's {_err(o.eager_vs_float64)}): eager rounds to {o.dtype} after "
            f"every op, compiled code less often; the difference from eager ({err}) is "
            f"eager's rounding. `{n.setting}` makes compiled round as eager does"
        )
        if n.eager_nonfinite:
            text += f". Eager makes {n.eager_nonfinite.makes} at {at_words(n.eager_nonfinite)}"
        return text
    shown = [f"{r.op} at {short_path(r.file)}:{r.line}" if r.file else r.op for r in n.random_ops]
    ops = ", ".join(shown[:SHOWN]) + (
        f" and {len(shown) - SHOWN} more" if len(shown) > SHOWN else ""
    )
    if n.verdict == RANDOM_ONLY:
        return (
            f"outputs differ by random numbers only{measured}: the call draws from "
            f"{ops}; with `{n.setting}` and one seed, eager and compiled match"
        )
    parts = [f"outputs DIFFER from eager{measured}" if n.verdict == DIFFER else n.verdict]
    nonfinite = next((o.nonfinite for o in n.outputs if o.nonfinite), "")
    if nonfinite:
        parts[0] += f"; {nonfinite}"
    parts += checked
    if n.stage:
        parts.append(f"first seen under `{n.stage}`" + (f" ({n.bisector})" if n.bisector else ""))
    if n.first_node:
        made = f", making {n.first_node.makes}" if n.first_node.makes else ""
        agree = "" if n.first_node.inputs_agree else " (its inputs already differ)"
        parts.append(f"the first op that departs: {at_words(n.first_node)}{made}{agree}")
    if n.first_nonfinite:
        parts.append(f"the first {n.first_nonfinite.makes}: {at_words(n.first_nonfinite)}")
    if n.random_ops:
        parts.append(f"random ops ({ops}) compared with torch's own random numbers too")
    return "; ".join(parts)


def numerics_of(n: Numerics | None, kernels: list[Kernel]) -> Numerics | None:
    """The worker's numerics with the kernels named and the verdict in words."""
    if n is None:
        return None
    for at in (n.first_node, n.first_nonfinite):
        if at is not None and not at.kernel:
            at.kernel = kernel_of(kernels, at)
    n.words = words(n)
    return n
