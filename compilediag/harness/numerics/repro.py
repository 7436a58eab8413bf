"""repro_<graph>.py: the graph that departs, its inputs (saved beside it), eager against
the backend stage that departs, and the comparison; it runs in a clean process, prints the
difference and exits 1 where it still departs (0 where it does not)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from compilediag.harness.numerics.graphs import custom_op
from compilediag.harness.numerics.search import SEED, GraphCheck
from compilediag.report.numerics import STAGES

TEMPLATE = '''"""Written by compilediag: graph {index} of {model}, compiled by `{stage}`, departs from
eager{where}. Run it alone: python {script}
It exits 1 while the difference is there, 0 once it is gone."""

import sys
import warnings
from pathlib import Path

import torch
{imports}
warnings.filterwarnings("ignore", message="dynamo_pgo force disabled")  # (no caches: below)
HERE = Path(__file__).resolve().parent
SEED = {seed}
STAGE = {stage!r}
FALLBACK_RANDOM = {random}  # True where the graph draws random numbers: torch's own in both runs


{code}

def clone(xs):
    return [x.detach().clone() if isinstance(x, torch.Tensor) else x for x in xs]


def as_tensors(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def main():
    saved = torch.load(HERE / "{data}", weights_only=False)
    graph = {cls}()
    for name, value in saved["attrs"].items():
        *path, last = name.split(".")
        owner = graph
        for part in path:
            owner = getattr(owner, part)
        setattr(owner, last, value)
    inputs = saved["inputs"]
    torch.manual_seed(SEED)
    eager = as_tensors(graph(*clone(inputs)))
    torch._inductor.config.fallback_random = FALLBACK_RANDOM
    torch._inductor.config.force_disable_caches = True
    compiled_fn = torch.compile(graph, backend=STAGE)
    torch.manual_seed(SEED)
    compiled = as_tensors(compiled_fn(*clone(inputs)))
    departs = False
    for i, (e, c, tol) in enumerate(zip(eager, compiled, saved["tolerances"])):
        e, c = e.detach().double(), c.detach().double()
        both = e.isfinite() & c.isfinite()
        err = float((e[both] - c[both]).abs().max()) if bool(both.any()) else 0.0
        odd = int((e.isfinite() & ~c.isfinite()).sum())
        bad = odd > 0 or (tol is not None and err > tol)
        departs |= bad
        print(f"output {{i}}: max abs err {{err:.3g}}"
              + (f" (tolerance {{tol:.3g}})" if tol is not None else "")
              + (f", {{odd}} NaN/inf where eager is finite" if odd else "")
              + (": DEPARTS" if bad else ": agrees"))
    print(("departs from eager" if departs else "agrees with eager") + f" under {{STAGE}}")
    return 1 if departs else 0


if __name__ == "__main__":
    sys.exit(main())
'''


def write_repro(
    torch: Any,
    c: GraphCheck,
    stage: str,
    random: bool,
    model_file: str,
    folder: Path,
    where: str,
    tolerances: list[float | None],
) -> str:
    """repro_<graph>.py and its data beside it; its path."""
    folder.mkdir(parents=True, exist_ok=True)
    gm = c.g.gm
    code = gm.print_readable(print_output=False)
    cls = re.search(r"^class (\w+)\(", code, re.M)
    attrs = {str(n.target): _fetch(gm, str(n.target)) for n in gm.graph.nodes if n.op == "get_attr"}
    imports = ""
    # the model's file registers the graph's custom ops, or a backend of its own
    if stage not in STAGES or any(custom_op(n) is not None for n in gm.graph.nodes):
        imports = (
            "import importlib.util\n\n"
            "# the model's file registers what the graph calls or compiles it with\n"
            f"sys.path.insert(0, {str(Path(model_file).parent)!r})\n"
            f"_spec = importlib.util.spec_from_file_location('user_model', {model_file!r})\n"
            "_user = importlib.util.module_from_spec(_spec)\n"
            "_spec.loader.exec_module(_user)\n"
        )
    name = f"repro_{c.g.index}"
    torch.save(
        {"inputs": c.g.inputs, "attrs": attrs, "tolerances": tolerances},
        folder / f"{name}.pt",
    )
    script = folder / f"{name}.py"
    script.write_text(
        TEMPLATE.format(
            index=c.g.index,
            model=model_file,
            stage=stage,
            where=where,
            script=script,
            imports=imports,
            seed=SEED,
            random=random,
            code=code,
            data=f"{name}.pt",
            cls=cls.group(1) if cls else "GraphModule",
        )  # fmt: skip
    )
    return str(script)


def _fetch(gm: Any, target: str) -> Any:
    obj = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj
