"""Fixes for context managers, side effects, higher-order ops and Python constructs."""

from __future__ import annotations

import re
from pathlib import Path

from compilediag.fixes.constant import constant
from compilediag.fixes.model import GUARD, MOVES_OUT, REMOVES, Break, Fix, fix, quoted, rule
from compilediag.report.vocabulary import BreakCause

# --- context managers, side effects, higher-order ops ---------------------------------------


def _context(b: Break) -> Fix:
    kind = quoted(r"enter a `([^`]+)` context manager", b.explanation) or quoted(
        r"<class '([\w.]+)'> not supported", b.explanation
    )
    shown = f"a `{kind}`" if kind else "this"
    return fix(
        b, BreakCause.CONTEXT_MANAGER,
        f"Dynamo cannot enter {shown} context manager: move the `with` block out of the "
        "compiled function (around the call to the model). torch's own ones (no_grad, "
        "autocast, set_grad_enabled) work when they are created inside the compiled function.",
        "moves the `with` block out of the compiled region; the break is gone",
    )  # fmt: skip


rule("GB0142", "Unsupported context manager")(_context)
rule("GB0262", "unsupported contextlib.* API")(_context)


@rule("GB0067", "HOP: Unsafe side effect")
def _hop_side_effect(b: Break) -> Fix:
    if "checkpoint" in b.text or any("checkpoint" in h for h in b.hints) or not b.explanation:
        return fix(
            b, BreakCause.CHECKPOINT_SIDE_EFFECT,
            "The checkpointed function mutates state from outside it (a list, a dict, an "
            "attribute). If it need not run again when backward recomputes the function, set "
            "torch._dynamo.config.skip_fwd_side_effects_in_bwd_under_checkpoint = True; else "
            "move the mutation out of the checkpointed function.",
            "the side effect runs in forward only (not again when backward recomputes); the "
            "break is gone",
            config={"skip_fwd_side_effects_in_bwd_under_checkpoint": True}, code_edit=False,
        )  # fmt: skip
    return fix(
        b, BreakCause.HOP_SIDE_EFFECT,
        "The function given to torch.cond / the higher-order op mutates a variable from "
        "outside it: return the new value from the function instead.",
        REMOVES,
    )  # fmt: skip


# --- Python constructs ---------------------------------------------------------------------


def tensor_to_string(b: Break, name: str) -> Fix:
    return fix(
        b, BreakCause.TENSOR_TO_STRING,
        f"`{name}()` of a tensor needs its values in Python: format it outside the "
        f"compiled function, or {GUARD}. To log it, print the tensor itself (print in "
        "reorderable_logging_functions).",
        MOVES_OUT,
    )  # fmt: skip


@rule("GB0569", "repr() on tensor")  # 2.14+; GB0059 before
def _tensor_repr(b: Break) -> Fix:
    name = quoted(r"\b(str|repr|format|ascii)\(", b.code) or "repr"
    return tensor_to_string(b, name)


ITERATORS = ("zip", "map", "enumerate", "filter", "reversed", "dict_items", "dict_keys",
             "dict_values", "list_iterator", "tuple_iterator", "range_iterator")  # fmt: skip


def _iterator_input(b: Break, kind: str) -> Fix:
    return fix(
        b, BreakCause.ITERATOR_INPUT,
        f"An iterator (`{kind}`) made outside the compiled function can't be traced: pass a list "
        "or tuple in (`list(zip(...))`), or build the iterator inside the function.",
        REMOVES,
    )  # fmt: skip


@rule("GB0156", "Unsupported method call")
def _method(b: Break) -> Fix:
    method = quoted(r"method `([^`]+)`", b.explanation)
    cls = quoted(r"of class `([^`]+)`", b.explanation)
    if cls in ITERATORS and method in ("__iter__", "__next__", ""):
        return _iterator_input(b, cls)
    if method == "data_ptr":
        return fix(
            b, BreakCause.DATA_PTR,
            f"`{cls}.data_ptr()` (a memory address) cannot be traced: compare storages "
            "outside the compiled function, or drop the check.",
            MOVES_OUT,
        )  # fmt: skip
    where = f" (inside {Path(b.library_file).name})" if b.library_file else ""
    shown = f"`{cls}.{method}`" if method else "this method"
    return fix(
        b, BreakCause.UNSUPPORTED_CALL,
        f"Dynamo cannot trace {shown}{where}: avoid it in the compiled function, or call it "
        "outside.",
        MOVES_OUT,
    )  # fmt: skip


@rule("GB9493", "C-implemented special method without VariableTracker model")  # 2.14+
def _c_special_method(b: Break) -> Fix:
    kind = quoted(r"'([\w.]+)' implements", b.explanation)
    method = quoted(r"implements '(\w+)'", b.explanation)
    if kind in ITERATORS and method in ("__iter__", "__next__", ""):
        return _iterator_input(b, kind)
    where = f" (inside {Path(b.library_file).name})" if b.library_file else ""
    shown = f"`{kind}.{method}`" if kind and method else "this object's C method"
    return fix(
        b, BreakCause.UNSUPPORTED_CALL,
        f"Dynamo has no model of {shown}{where}, a method written in C: convert the object "
        "to a list, tuple or dict before it reaches the compiled code, or call it outside.",
        MOVES_OUT,
    )  # fmt: skip


@rule("GB0811", "missing tp_iter")
def _no_iter(b: Break) -> Fix:
    kind = quoted(r"iterate over `(?:UserDefinedObjectVariable\()?(\w+)", b.explanation)
    if kind in ITERATORS or re.search(r"\bzip|\bmap|enumerate", b.explanation):
        return _iterator_input(b, kind or "zip")
    return fix(
        b, BreakCause.UNSUPPORTED_CALL,
        f"Dynamo cannot iterate over this object{f' (`{kind}`)' if kind else ''}: pass a "
        "list or tuple instead.",
        REMOVES,
    )  # fmt: skip


def _grad_state(b: Break) -> Fix:
    return fix(
        b, BreakCause.REQUIRES_GRAD_IN_GRAPH,
        "Don't change requires_grad inside the compiled function: make the tensor an "
        "nn.Parameter (or a tensor with requires_grad set) outside it and pass it in, or "
        "return `t.detach()`.",
        REMOVES,
    )  # fmt: skip


rule("GB0225", "Attempted to use tensor creation function with requires_grad=True")(_grad_state)
rule("GB0206", "setattr() on Tensor.requires_grad")(_grad_state)
rule("GB0125", "Unsupported Tensor.requires_grad_() call")(_grad_state)
rule("GB8985", "requires_grad_() intermediate leaked as output")(_grad_state)


@rule("GB0123", "Unsupported Tensor.backward() call")
def _backward(b: Break) -> Fix:
    if "trace_autograd_ops" in b.explanation or not b.explanation:
        return fix(
            b, BreakCause.AUTOGRAD_IN_GRAPH,
            "Set torch._dynamo.config.trace_autograd_ops = True so Dynamo traces backward() "
            "into the graph; or call backward() outside the compiled function.",
            "backward() is traced into the graph; the break is gone",
            config={"trace_autograd_ops": True}, code_edit=False,
        )  # fmt: skip
    return fix(b, BreakCause.AUTOGRAD_IN_GRAPH,
                "Call backward() outside the compiled function (compile the forward and loss).",
                MOVES_OUT)  # fmt: skip


@rule("GB0363", "An opaque object was created in the middle of the program.")
def _opaque(b: Break) -> Fix:
    if "Generator" in b.code or "Generator" in b.explanation:
        return constant("GB7650", b)
    return fix(
        b, BreakCause.CREATED_IN_GRAPH,
        "Create the object before calling the compiled function and pass it in, or keep it "
        "on the module.",
        REMOVES,
    )  # fmt: skip
