"""Fixes for data-dependent values and shapes, NumPy, custom ops and fake kernels."""

from __future__ import annotations

import re
import sys
from dataclasses import replace

from compilediag.fixes.constant import constant
from compilediag.fixes.model import MOVES_OUT, REMOVES, Break, Fix, fix, quoted, rule
from compilediag.report.vocabulary import BreakCause

# --- data-dependent values and shapes --------------------------------------------------------

CONTROL_FLOW = re.compile(r"^\s*(if|elif|while|assert)\b|\bif\b.*\belse\b|\brange\(")
TO_PYTHON = re.compile(r"\.(tolist|item)\(\)")  # a tensor made Python numbers


def _scalar_fix(b: Break, what: str) -> Fix:
    return fix(
        b, BreakCause.ITEM,
        f"Set torch._dynamo.config.capture_scalar_outputs = True so {what} is traced as a "
        "symbolic scalar; or keep the value a 0-d tensor instead.",
        "the scalar stays in the graph (an unbacked symbol); the break is gone",
        config={"capture_scalar_outputs": True}, code_edit=False,
    )  # fmt: skip


def scalar_read_later(f: Fix, code: str, name: str, line: int, later: str) -> Fix:
    """The value `code` converts to Python (`f`, capture_scalar_outputs' fix) is assigned to
    `name`, read at `line` (`later`): a list from .tolist() indexes or sizes there, where an
    unbacked number breaks again (a look: torch's break moved to `return h[rows]`); a
    number may be needed there too (a slice bound a library checks: a BERT's break moved
    into its attention, 2 graphs to 3)."""
    at = f"line {line} (`{later.strip()}`)"
    if ".tolist()" in code:
        return replace(
            f, text=f"`{name}` (a list of Python numbers from .tolist()) is used at {at}: "
            "capture_scalar_outputs only moves the break there, where the unbacked numbers "
            "index or size. Keep it a tensor: drop .tolist() and index with the tensor.",
            effect="no conversion to Python here, so no break for it", config={},
            code_edit=True,
        )  # fmt: skip
    return replace(
        f, effect="the scalar stays in the graph (an unbacked symbol) and this line's break "
        f"is gone; `{name}` is used at {at}: where torch needs its value there (a size, an "
        "index, a library's check), the break moves there",
    )  # fmt: skip


# torch's nn.Transformer layers reading whether the mask they are given is causal
# (torch/nn/modules/transformer.py, _detect_is_causal_mask): `bool((mask == ...).all())`
CAUSAL_CHECK = "make_causal = bool("


@rule("GB0124", "Unsupported Tensor.item() call with capture_scalar_outputs=False")
def _item(b: Break) -> Fix:
    if CAUSAL_CHECK in b.code:  # (capture_scalar_outputs moves it to the bool(): torch 2.13)
        return fix(
            b, BreakCause.ITEM_BRANCH,
            "torch's Transformer layers read the mask's values to learn whether it is causal "
            "(a bool() of an .item(), which capture_scalar_outputs only moves to the bool()): "
            "say it in this call instead, `is_causal=True` with a causal mask (`is_causal="
            "False` with another), and torch skips the check.",
            REMOVES, at_call=True,
        )  # fmt: skip
    if CONTROL_FLOW.search(b.code):
        return fix(
            b, BreakCause.ITEM_BRANCH,
            "The .item() value steers Python control flow, so capture_scalar_outputs alone "
            "only moves the break to the branch: keep it a tensor and pick with "
            "torch.where(cond, a, b), or use torch.cond(pred, true_fn, false_fn, operands).",
            REMOVES,
        )  # fmt: skip
    return _scalar_fix(b, ".item()")


@rule("GB0033", "Data dependent operator")
def _data_dependent_op(b: Break) -> Fix:
    op = quoted(r"Operator `([\w.]+)`", b.explanation)
    if op.startswith("aten._local_scalar_dense") and not CONTROL_FLOW.search(b.code):
        return _scalar_fix(b, "the tensor -> Python number conversion (.item(), .tolist())")
    if op.startswith("aten.equal"):
        return fix(
            b, BreakCause.DATA_DEPENDENT_OP,
            "torch.equal returns a Python bool from the data: compare as a tensor, "
            "`torch.all(a == b)` (shapes equal), and pick results with torch.where instead of "
            "`if`; or compare outside the compiled function.",
            REMOVES,
        )  # fmt: skip
    if CONTROL_FLOW.search(b.code):
        return constant("GB0170", b)
    shown = f"`{op}`" if op else "This operator"
    return fix(
        b, BreakCause.DATA_DEPENDENT_OP,
        f"{shown} returns a Python value computed from tensor data: keep the result a tensor, "
        "or wrap the computation as a custom op (torch.library.custom_op).",
        REMOVES,
    )  # fmt: skip


# ops that raise DynamicOutputShapeException in every case: no meta kernel for a
# data-dependent size (checked on the installed torch where there is one)
NO_META_OPS = {"aten.linalg_lstsq"}
ALTERNATIVES = {
    "aten.linalg_lstsq": "torch.linalg.pinv(A) @ B, or torch.linalg.solve(A, B) for a "
    "square, full-rank A",
}


def _op(b: Break) -> str:
    return quoted(r"(aten\.\w+\.\w+|aten\.\w+)", b.explanation + " " + b.gb_type)


def has_dynamic_meta(op: str) -> bool | None:
    """Whether torch's fake tensors can run `aten.op.overload` with a data-dependent output
    size (torch imported only when it already is)."""
    base = ".".join(op.split(".")[:2])
    if base in NO_META_OPS:
        return False
    torch = sys.modules.get("torch")
    if torch is None or op.count(".") != 2:
        return None
    try:
        from torch._subclasses import fake_impls

        ns, name, overload = op.split(".")
        func = getattr(getattr(getattr(torch.ops, ns), name), overload)
        for check, impl in fake_impls.op_implementations_checks:
            if check(func):
                return getattr(impl, "__name__", "") != "dyn_shape"
    except Exception:  # a private API: any surprise means "don't know"
        return None
    return None


def _no_meta(b: Break, op: str, configured: bool) -> Fix:
    base = ".".join(op.split(".")[:2])
    alt = ALTERNATIVES.get(base, "fixed-shape ops")
    shown = f"`{op}`" if op else "This operator"
    why = (
        "it breaks here because capture_dynamic_output_shape_ops = True makes Dynamo try; "
        "with the setting off it breaks as a plain dynamic-shape op"
        if configured
        else "setting capture_dynamic_output_shape_ops = True would only change this break "
        "into GB0037"
    )
    return fix(
        b, BreakCause.DYNAMIC_OUTPUT_SHAPE_NO_META,
        f"{shown} has no meta kernel for a data-dependent output shape, so Dynamo cannot "
        f"trace it ({why}). Replace it with {alt}, or call it outside the compiled function.",
        REMOVES,
    )  # fmt: skip


@rule("GB0036", "Dynamic shape operator")
def _dynamic_shape(b: Break) -> Fix:
    op = _op(b)
    if op and has_dynamic_meta(op) is False:
        return _no_meta(b, op, configured=False)
    if made := TO_PYTHON.search(b.code):
        return fix(
            b, BreakCause.DYNAMIC_OUTPUT_SHAPE,
            f"The op's result is made Python numbers on this line ({made[0]}): with "
            "capture_dynamic_output_shape_ops = True torch fails here instead (it can't guard "
            f"on a data-dependent size). Keep the result a tensor (drop {made[0]}; index with "
            "the tensor) and set torch._dynamo.config.capture_dynamic_output_shape_ops = True; "
            "or keep sizes fixed (torch.where(mask, x, 0), masking instead of indexing).",
            "with the result a tensor and the setting, the op is traced with an unbacked size; "
            "the break is gone",
            config={"capture_dynamic_output_shape_ops": True},
        )  # fmt: skip
    return fix(
        b, BreakCause.DYNAMIC_OUTPUT_SHAPE,
        "Set torch._dynamo.config.capture_dynamic_output_shape_ops = True so the op is traced "
        "with a data-dependent size; or keep sizes fixed (torch.where(mask, x, 0), masking "
        "instead of indexing).",
        "the op is traced with an unbacked size; the break is gone (code that then branches "
        "on that size can still break)",
        config={"capture_dynamic_output_shape_ops": True}, code_edit=False,
    )  # fmt: skip


@rule("GB0037", "Dynamic shape operator (no meta kernel)")
def _dynamic_no_meta(b: Break) -> Fix:
    return _no_meta(b, _op(b), configured=True)


# --- NumPy --------------------------------------------------------------------------------

NUMPY_ALTERNATIVES = {
    "lexsort": "torch.argsort(key, stable=True) per key, last key first",
    "unique": "torch.unique",
    "searchsorted": "torch.searchsorted",
}


@rule("GB0294", "attempted to trace numpy function unsupported by PyTorch")
def _numpy_function(b: Break) -> Fix:
    name = quoted(r"function (?:<built-in function |<function )?(\w+)", b.explanation)
    alt = NUMPY_ALTERNATIVES.get(name)
    shown = f"np.{name}" if name else "This NumPy function"
    use = f"use {alt} instead" if alt else "use the torch op that does the same"
    return fix(
        b, BreakCause.NUMPY,
        f"{shown} has no counterpart in torch._numpy, Dynamo's NumPy: {use} (on the tensor), "
        "or move this step out of the compiled function.",
        REMOVES,
    )  # fmt: skip


def ndarray(b: Break) -> Fix:
    name = quoted(r"ndarray\.(\w+)", b.explanation)
    shown = f"`ndarray.{name}`" if name else "This ndarray method"
    return fix(
        b, BreakCause.NUMPY,
        f"{shown} is not modelled by torch._numpy, Dynamo's NumPy: do this step with torch "
        "ops on the tensor, or move it out of the compiled function.",
        REMOVES,
    )  # fmt: skip


rule("GB0158", "Unsupported ndarray method call")(ndarray)
rule("GB0157", "Unsupported ndarray attribute access")(ndarray)
rule("GB0159", "Unsupported ndarray.__version__ access")(ndarray)


# --- custom ops and fake kernels ---------------------------------------------------------------

CUSTOM_OP = re.compile(r"torch\.ops\.(\w+)\.(\w+)")


def _fake_kernel_fix(b: Break, raises: bool) -> Fix:
    m = CUSTOM_OP.search(b.code) or re.search(r"call_function (\w+)\.(\w+)\(", b.explanation)
    name = f"{m.group(1)}::{m.group(2)}" if m else "ns::op"
    what = "raises NotImplementedError" if raises else "is missing"
    return fix(
        b, BreakCause.MISSING_FAKE_KERNEL,
        f"The fake (meta) kernel of the custom op {name} {what}, so Dynamo cannot know the "
        f"shape of its output: register one, `@torch.library.register_fake(\"{name}\")` "
        "returning empty tensors of the output's shape and dtype (e.g. torch.empty_like(x)). "
        "The op is already a custom op: don't wrap it again.",
        "the op stays in the graph; the break is gone",
    )  # fmt: skip


@rule("GB0090", "Operator does not support running with fake tensors")
def _no_fake(b: Break) -> Fix:
    return _fake_kernel_fix(b, raises=False)


@rule("GB0087", "NotImplementedError/UnsupportedFakeTensorException when running FX node")
def _fake_raises(b: Break) -> Fix:
    if "NotImplementedError" in b.explanation and (
        CUSTOM_OP.search(b.code) or re.search(r"call_function \w+\.\w+\(", b.explanation)
    ):
        return _fake_kernel_fix(b, raises=True)
    return fix(
        b, BreakCause.FAKE_TENSOR,
        "An op of this line cannot run on fake tensors: if it is a custom op, give it a fake "
        "kernel (torch.library.register_fake); if it is a torch op, move the call out of the "
        "compiled function and report it to PyTorch.",
        MOVES_OUT,
    )  # fmt: skip


@rule("GB0015", "Attempted to wrap sparse Tensor")
@rule("GB0277", "Attempted to wrap sparse Tensor with VariableTracker")
def _sparse(b: Break) -> Fix:
    """torch's hint (fullgraph=False, or create the sparse tensor outside the compiled
    region) is how a look's GCN already ran: its sparse adjacency was an input, made
    outside; dense, torch compiled the model whole (1 graph, no break)."""
    return fix(
        b, BreakCause.SPARSE_TENSOR,
        "Dynamo does not trace sparse tensors: code that reads one runs in eager mode, "
        "however it was made, and fullgraph=False (torch's hint) is how it runs already. "
        "Pass the tensor dense where it fits in memory (`.to_dense()` before the call: a "
        "dense matmul compiles), or compile only the dense code around the sparse op (its "
        "layers), not the function that reads the sparse tensor.",
        REMOVES,
    )  # fmt: skip
