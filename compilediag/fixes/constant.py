"""Rules whose advice is the same text for every break of their kind, as data: one row
per GB id (the gb_types of torch's it answers, compilediag's cause, what to change, what
the change does). A rule whose advice depends on the break is code, in `calls`, `values`
or `python`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from compilediag.fixes.model import MOVES_OUT, REMOVES, RULES, Break, Fix, fix, rule
from compilediag.report.vocabulary import BreakCause


@dataclass(frozen=True)
class Row:
    gb_id: str
    gb_types: tuple[str, ...]
    cause: BreakCause
    text: str
    effect: str
    settings: dict[str, Any] = field(default_factory=dict)  # Fix.config
    code_edit: bool = True
    also: tuple[tuple[str, str], ...] = ()  # (GB id, gb_type) that the same advice answers

    def make(self, b: Break) -> Fix:
        return fix(
            b, self.cause, self.text, self.effect, config=self.settings, code_edit=self.code_edit
        )


def constant(gb_id: str, b: Break) -> Fix:
    """The fix of a row, for a rule that answers with it in some cases."""
    return RULES[gb_id].make(b)


ROWS = (
    Row(
        "GB0025",
        ("Call to `torch._dynamo.graph_break()`",),
        BreakCause.EXPLICIT_GRAPH_BREAK,
        (
            "This break is on purpose: remove the torch._dynamo.graph_break() call (keep it"
            " only if the code after it cannot be compiled)."
        ),
        REMOVES,
    ),
    Row(
        "GB4636",
        ("Call to `torch._dynamo.step_unsupported()`",),
        BreakCause.EXPLICIT_GRAPH_BREAK,
        (
            "Remove the `torch._dynamo.step_unsupported()` call: it is a debugging aid that"
            " stops the graph and skips the rest of the function."
        ),
        REMOVES,
        also=(("GB0275", "torch._dynamo.step_unsupported() with empty checkpoint"),),
    ),
    Row(
        "GB0170",
        ("Data-dependent branching",),
        BreakCause.DATA_DEPENDENT_BRANCH,
        (
            "Make the branch tensor-valued: compute both sides and pick with "
            "torch.where(cond, a, b), or use torch.cond(pred, true_fn, false_fn, operands) "
            "for real control flow."
        ),
        REMOVES,
    ),
    Row(
        "GB0109",
        ("Tensor.tolist() with non-integer tensor",),
        BreakCause.TOLIST,
        (
            "Keep the values in the tensor (index it, `h[0]`) instead of calling .tolist();"
            " Dynamo traces .tolist() only on integer tensors (with capture_scalar_outputs "
            "= True)."
        ),
        REMOVES,
    ),
    Row(
        "GB0250",
        ("ndarray.astype(object)",),
        BreakCause.NUMPY,
        (
            "NumPy object arrays have no torch counterpart: keep numbers in tensors inside "
            "the compiled function and build the Python objects outside it."
        ),
        MOVES_OUT,
    ),
    Row(
        "GB0066",
        ("Graph break under GenericContextWrappingVariable",),
        BreakCause.CONTEXT_MANAGER,
        (
            "A break inside a `with` block of a context manager Dynamo cannot resume across"
            " makes it run the whole function in eager: fix the break inside the block "
            "(reported with it), or move the `with` block out of the compiled function."
        ),
        "the function compiles again (up to the remaining breaks)",
    ),
    Row(
        "GB7000",
        ("graph break in loop",),
        BreakCause.BREAK_IN_LOOP,
        (
            "A break inside a for/while loop makes Dynamo run the whole function in eager: "
            "fix the break inside the loop (reported with it)."
        ),
        "the function compiles again (up to the remaining breaks)",
    ),
    Row(
        "GB4413",
        ("HOP: Non-nullified side effect",),
        BreakCause.HOP_SIDE_EFFECT,
        (
            "The higher-order op's function leaves an outer variable changed: restore it "
            "before the function returns, or return the new value instead of mutating."
        ),
        REMOVES,
    ),
    Row(
        "GB0207",
        ("sort with non-constant keys",),
        BreakCause.SORT_TENSORS,
        (
            "sorted() of tensors needs their values in Python: stack them and sort in torch"
            " (`torch.stack(items).sort().values`)."
        ),
        REMOVES,
    ),
    Row(
        "GB8977",
        ("Invalid call to __build_class__",),
        BreakCause.CLASS_DEFINITION,
        ("Define the class at module level, outside the compiled function."),
        REMOVES,
    ),
    Row(
        "GB0092",
        ("Reconstruction failure",),
        BreakCause.UNRECONSTRUCTABLE_OUTPUT,
        (
            "The compiled function returns (or keeps across a break) a value Dynamo cannot "
            "rebuild, such as a bound method of an object made inside it: return tensors, "
            "numbers or the object itself, and make the callable outside."
        ),
        "the function compiles (no fallback to eager)",
    ),
    Row(
        "GB4198",
        ("Attempted to copy.deepcopy a tensor",),
        BreakCause.COPY_TENSOR,
        ("Use `t.clone()` (or `t.detach().clone()`) instead of copy.deepcopy on a tensor."),
        REMOVES,
    ),
    Row(
        "GB9186",
        ("using `torch.autograd.grad` with `torch._dynamo.config.trace_autograd_ops=False`",),
        BreakCause.AUTOGRAD_IN_GRAPH,
        (
            "Set torch._dynamo.config.trace_autograd_ops = True so Dynamo traces "
            "torch.autograd.grad into the graph; or call it outside the compiled function."
        ),
        "torch.autograd.grad is traced into the graph; the break is gone",
        settings={"trace_autograd_ops": True},
        code_edit=False,
    ),
    Row(
        "GB7650",
        ("torch.Generator method",),
        BreakCause.GENERATOR_RNG,
        (
            "Dynamo cannot create or use a torch.Generator in compiled code: draw the "
            "random tensor outside (`torch.rand(..., generator=gen)`) and pass it in, or "
            "use the global RNG inside (`torch.rand(...)`, seeded with torch.manual_seed "
            "outside)."
        ),
        REMOVES,
    ),
    Row(
        "GB0091",
        ("Read uninitialized cell",),
        BreakCause.CLOSURE_CELL,
        (
            "An inner function reads a variable of the enclosing function before it is "
            "assigned (in eager this raises NameError): assign it before the inner function"
            " is called."
        ),
        REMOVES,
    ),
    Row(
        "GB0273",
        ("Keyword args passed to exception constructor",),
        BreakCause.EXCEPTION,
        (
            "Pass the exception's arguments positionally (`raise MyError(0)`), or set them "
            "as attributes after creating it."
        ),
        REMOVES,
    ),
    Row(
        "GB0034",
        ("Data-dependent assertion failed (cannot compile partial graph)",),
        BreakCause.ASSERT,
        (
            "Replace the assert on tensor data with torch._assert(cond, msg) (checked at "
            "run time in the graph), or remove it."
        ),
        REMOVES,
    ),
    Row(
        "GB0119",
        ("Uninitialized nn.Module",),
        BreakCause.MODULE_INIT,
        ("Call super().__init__() first in the module's __init__."),
        REMOVES,
    ),
    Row(
        "GB0003",
        ("Attempt to trace generator",),
        BreakCause.GENERATOR,
        (
            "Don't compile a generator function: compile a plain function that calls it "
            "(and consumes it, e.g. list(gen(x)))."
        ),
        REMOVES,
    ),
)

for _row in ROWS:
    rule(_row.gb_id, *_row.gb_types)(_row.make)
    for _gb_id, _gb_type in _row.also:
        rule(_gb_id, _gb_type)(_row.make)
