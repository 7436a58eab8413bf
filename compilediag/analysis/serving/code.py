"""The chosen plan as code the user can paste: the compile, the marks or the padding a
request gets, the warm-up loop over the requests that compile every graph the plan needs,
and torch's `fail_on_recompile` stance after it. Rendered from the plan's fields and the
tensors' names and dtypes the run read; a test runs it on another stream."""

from __future__ import annotations

from typing import Any

from compilediag.harness.serving.cudagraphs import records_cuda_graphs
from compilediag.harness.serving.plans import bucket_sizes
from compilediag.report.serving import Plan

PAD_HELPER = '''def pad_to(x, dim, sizes):
    """x padded with zeros at the end of `dim` up to the next of `sizes`: mask the padding
    (attention_mask 0), and slice the outputs back to the request's sizes."""
    extra = min(s for s in sizes if s >= x.size(dim)) - x.size(dim)
    if not extra:
        return x
    return torch.nn.functional.pad(x, [0, 0] * (x.dim() - dim - 1) + [0, extra])
'''


def compile_line(kwargs: dict[str, Any], plan: Plan) -> str:
    args = ["model"]
    if kwargs.get("backend", "inductor") != "inductor":
        args.append(f"backend={kwargs['backend']!r}")
    if kwargs.get("mode"):
        args.append(f"mode={kwargs['mode']!r}")
    dynamic = kwargs.get("dynamic")
    if plan.kind == "dynamic":
        dynamic = True
    elif plan.kind == "bucket":
        dynamic = False  # each padded size its own graph: none made dynamic behind your back
    elif plan.kind == "mark_dynamic" and dynamic is False:
        return f"compiled = torch.compile({', '.join(args)})  # not dynamic=False: it keeps marked sizes static"
    if dynamic is not None:
        args.append(f"dynamic={dynamic}")
    return f"compiled = torch.compile({', '.join(args)})"


def plan_code(
    plan: Plan, kwargs: dict[str, Any], names: list[str], dtypes: list[str],
    warmup: list[list[list[int]]], device: str = "cpu", mode: str = "inference_mode",
) -> str:  # fmt: skip
    """The plan as a script's lines; `warmup`: each warm-up request's tensors' shapes;
    `mode`: the serving mode serve() calls the model in (the warm-up and every request
    alike, whatever mode the caller is in: torch's guards tell the modes apart)."""
    lines = ["import torch", ""]
    if plan.kind == "bucket":
        lines += [PAD_HELPER, ""]
    lines += [
        compile_line(kwargs, plan), "", "",
        f"def serve({', '.join(names)}):",
        f'    """One request, in torch.{mode}() like the warm-up (a graph compiled in one mode',
        "    recompiles in another), whatever mode the caller is in."
        + (
            " Make its tensors outside\n    inference_mode, as a tokenizer does: one made "
            "inside it is another kind to\n    torch's guards.\"\"\""
            if mode == "inference_mode"
            else '"""'
        ),
    ]  # fmt: skip
    for x in plan.dims:
        name = names[x.input]
        if plan.kind == "mark_dynamic":
            lines.append(
                f"    torch._dynamo.maybe_mark_dynamic({name}, {x.dim})  # {x.low}..{x.high} in the stream"
            )
    padded = [(names[x.input], x.dim, bucket_sizes(x)) for x in plan.dims if plan.kind == "bucket"]
    if padded:  # above the largest bucket: eager, as a server runs what it did not capture
        above = " or ".join(f"{n}.size({d}) > {max(z)}" for n, d, z in padded)
        lines += [
            f"    if {above}:",
            f"        with torch.{mode}():  # above the largest bucket: eager, no compile",
            f"            return model({', '.join(names)})",
            *(f"    {n} = pad_to({n}, {d}, {z})" for n, d, z in padded),
        ]
    lines += [f"    with torch.{mode}():", f"        return compiled({', '.join(names)})", "", ""]
    types = ", ".join(f"torch.{d}" for d in dtypes)
    on = "" if device == "cpu" else f", device={device!r}"
    call = f"serve(*(torch.zeros(s, dtype=d{on}) for s, d in zip(shapes, dtypes)))"
    twice = records_cuda_graphs(kwargs, device)
    lines += [
        "# warm-up: a call for each size its CUDA graphs record (the shapes before any padding)"
        if twice
        else "# warm-up: a call for each graph the plan needs (the shapes before any padding)",
        f"dtypes = [{types}]",
        f"for shapes in {[[tuple(s) for s in r] for r in warmup]!r}:",
        *(
            [
                "    for _ in range(2):  # CUDA graphs: a size's first call warms up, its second records",
                f"        {call}",
            ]
            if twice
            else [f"    {call}"]
        ),
        "# from here a request that would compile raises instead (torch >= 2.6)",
        'torch.compiler.set_stance("fail_on_recompile")',
    ]
    return "\n".join(lines) + "\n"
