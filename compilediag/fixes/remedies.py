"""Remedies that need no edit of the user's code: a torch config setting, a torch.compile
argument, or marking an input dynamic. `--try-fixes` runs the model once more with each
remedy that applies to a finding, and measures what it changed. No torch here: the worker
applies a remedy (`apply` runs there)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from compilediag.fixes import config_patch
from compilediag.fixes.calls import reorders_alone
from compilediag.report.model import GraphBreak, Report
from compilediag.report.vocabulary import BreakCause, FixOutcome, RecompileCause


@dataclass
class Remedy:
    name: str
    code: str  # what to write in the user's code, before the first call
    targets: list[str]  # the findings it is meant to remove, in words
    # torch._dynamo.config settings; a value "fn:builtins.print" is that function, added to
    # the setting (a set) rather than replacing it
    config: dict[str, Any] = field(default_factory=dict)
    compile_kwargs: dict[str, Any] = field(default_factory=dict)
    mark_dynamic: list[tuple[int, int]] = field(default_factory=list)  # (arg position, dim)
    kind: str = "breaks"  # what it is judged on: breaks, recompiles, or compile (time)
    # regional compilation: the container whose blocks are compiled each, not the model
    regional: str = ""


# a compile this long (seconds) with repeated blocks: regional compilation is worth a run
REGIONAL_MIN_S = 1.0

# break cause -> (name, config, code)
BREAK_REMEDIES: dict[BreakCause, tuple[str, dict[str, Any], str]] = {
    BreakCause.ITEM: (
        "capture_scalar_outputs",
        {"capture_scalar_outputs": True},
        "torch._dynamo.config.capture_scalar_outputs = True",
    ),
    BreakCause.DYNAMIC_OUTPUT_SHAPE: (
        "capture_dynamic_output_shape_ops",
        {"capture_dynamic_output_shape_ops": True},
        "torch._dynamo.config.capture_dynamic_output_shape_ops = True",
    ),
    BreakCause.PRINT: (
        "reorderable print",
        {"reorderable_logging_functions": "fn:builtins.print"},
        "torch._dynamo.config.reorderable_logging_functions.add(print)",
    ),
}


def remedies_for(
    report: Report, drops_reordered: Callable[[GraphBreak], bool] = lambda b: False
) -> list[Remedy]:
    """Every remedy that applies to a finding of the report, once each; no reordering for
    a break where torch `drops_reordered` calls (analysis's rules)."""
    out: dict[str, Remedy] = {}
    for b in report.graph_breaks:
        if b.cause in BREAK_REMEDIES:
            name, config, code = BREAK_REMEDIES[b.cause]
            if "reorderable_logging_functions" in config and (
                drops_reordered(b)
                or not reorders_alone(
                    f"{b.reason} {b.explanation}", b.code, report.environment.torch
                )
            ):
                continue  # (the break stays, or goes with the print)
            r = out.setdefault(name, Remedy(name, code, [], config=config))
            r.targets.append(f"{b.file}:{b.line} {b.reason}")
    causes = {r.cause for r in report.recompiles}
    if causes & {RecompileCause.SHAPE, RecompileCause.FLOAT, RecompileCause.INT}:
        r = Remedy(
            "dynamic=True",
            "torch.compile(model, dynamic=True)",
            [
                x.failed_guard
                for x in report.recompiles
                if x.cause in (RecompileCause.SHAPE, RecompileCause.FLOAT, RecompileCause.INT)
            ],
            compile_kwargs={"dynamic": True},
            kind="recompiles",
        )
        out[r.name] = r
    # the setting is of an nn.Module's int attributes (`self.n`): none for an argument
    attributes = [
        x.failed_guard for x in report.recompiles
        if x.cause == RecompileCause.INT and x.failed_guard.startswith("self.")
    ]  # fmt: skip
    if attributes:
        out["allow_unspec_int_on_nn_module"] = Remedy(
            "allow_unspec_int_on_nn_module",
            "torch._dynamo.config.allow_unspec_int_on_nn_module = True",
            attributes,
            config={"allow_unspec_int_on_nn_module": True},
            kind="recompiles",
        )
    blocks = report.target.repeated
    whole = report.compile_time.total_s if report.compile_time else 0.0
    if blocks is not None and whole >= REGIONAL_MIN_S:
        out["regional compilation"] = Remedy(
            "regional compilation",
            f"for block in model.{blocks.path}:  # instead of torch.compile(model)\n"
            "    block.compile()",
            [f"compile {whole:.2f} s: {blocks.count} {blocks.cls} blocks in one graph"],
            kind="compile", regional=blocks.path,
        )  # fmt: skip
    marks = _marks(report)
    if marks:
        names = ", ".join(f"torch._dynamo.mark_dynamic({n}, {d})" for n, _, d in marks)
        out["mark_dynamic"] = Remedy(
            "mark_dynamic",
            names + "  # on the inputs, before the first call",
            [x.failed_guard for x in report.recompiles if x.cause == RecompileCause.SHAPE],
            mark_dynamic=[(i, d) for _, i, d in marks],
            kind="recompiles",
        )
    return list(out.values())


def _marks(report: Report) -> list[tuple[str, int, int]]:
    """(input name, its position, dim) for size recompiles on a positional model input:
    every dim the advice marks (a look's remedy marked input_ids alone, which raised
    ConstraintViolationError, where the advice marked attention_mask's too)."""
    marks = []
    for r in report.recompiles:
        if r.cause != "shape" or r.change is None:
            continue
        dims = [(n, int(d)) for n, _, d in (x.rpartition(":") for x in r.dims)]
        for name, dim in dims or [(r.change.source, r.change.dim)]:
            position = report.target.params.index(name) if name in report.target.params else -1
            if position >= 0 and (name, position, dim) not in marks:
                marks.append((name, position, dim))
    return marks


def combined(remedies: list[Remedy]) -> Remedy | None:
    """All remedies at once, where there are several (their settings don't conflict);
    regional compilation, which changes what is compiled, is tried on its own."""
    remedies = [r for r in remedies if r.kind != "compile"]
    if len(remedies) < 2:
        return None
    r = Remedy("all of the above", "\n".join(x.code for x in remedies), [], kind="all")
    for x in remedies:
        r.config.update(x.config)
        r.compile_kwargs.update(x.compile_kwargs)
        r.mark_dynamic += x.mark_dynamic
        r.targets += x.targets
    return r


def apply(torch: Any, remedy: Remedy) -> None:
    """In the worker, before torch.compile: set what the remedy sets (`fixes.config_patch`,
    the one reader of a fix's settings: a "fn:" value is that function, added to the set)."""
    for key, value in config_patch(remedy.config).items():
        setattr(torch._dynamo.config, key, value)


def compile_verdict(before: float, after: float, outputs_match: bool | None) -> FixOutcome:
    """A remedy for compile time: it cuts it by a tenth or more, with the outputs equal."""
    if outputs_match is False:
        return FixOutcome.BREAKS_OUTPUTS
    return FixOutcome.CUTS_COMPILE if after <= 0.9 * before else FixOutcome.NO_EFFECT


def verdict(
    before: int, after: int, outputs_match: bool | None, graphs: tuple[int, int] = (0, 0)
) -> FixOutcome:
    """What a remedy did to the findings it targets (`before`, `after`: their counts), the
    graphs (before, after) telling a break moved elsewhere, one graph more, from none (a
    look: "no effect" beside "graphs 2 → 3", a BERT's break moved into its attention)."""
    if outputs_match is False:
        return FixOutcome.BREAKS_OUTPUTS
    if after == 0 and before > 0:
        return FixOutcome.REMOVES
    if after < before:
        return FixOutcome.PARTLY
    worse = after > before or (after == before and graphs[1] > graphs[0])
    return FixOutcome.WORSE if worse else FixOutcome.NO_EFFECT
