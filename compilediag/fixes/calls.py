"""Fixes for calls: printing, logging, warnings, functions Dynamo does not trace."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from compilediag.fixes.constant import constant
from compilediag.fixes.model import GUARD, MOVES_OUT, REMOVES, Break, Fix, fix, quoted, rule
from compilediag.fixes.python import tensor_to_string
from compilediag.paths import in_torch, library_path
from compilediag.report.vocabulary import BreakCause
from compilediag.trace.releases import installed, nonstrict_trace, release

# --- printing, logging, warnings -----------------------------------------------------

# argument kinds Dynamo can defer a logging call with (DebuggingVariable.can_reorder_logs):
# tensors, constants, string formatters; 2.8+ names Python types, 2.6/2.7 variable classes
REORDERABLE_ARGS = {
    "str", "int", "float", "bool", "NoneType", "Tensor", "Parameter", "complex",
    "ConstantVariable", "TensorVariable", "StringFormatVariable",
}  # fmt: skip


def _arg_types(explanation: str) -> list[str] | None:
    m = re.search(r"argument types \[([^\]]*)\]", explanation)
    if m:
        return re.findall(r"'([^']+)'", m.group(1))
    m = re.search(r"print \[((?:<class [^>]+>,? ?)*)\]", explanation)  # 2.6/2.7
    if m:
        return [c.rsplit(".", 1)[-1] for c in re.findall(r"<class '([^']+)'>", m.group(1))]
    return None


def _keywords(code: str, fn: str) -> list[str]:
    """The keyword arguments the source line passes to `fn(...)`: `stacklevel=2`."""
    m = re.search(rf"\b{re.escape(fn)}\((.*)\)", code)
    return re.findall(r"(?:^|,)\s*(\w+\s*=\s*[^,=][^,]*)", m.group(1)) if m else []


def _reorder(b: Break, fn: str, setting: str, cause: BreakCause, does: str, effect: str) -> Fix:
    """Add `fn` to reorderable_logging_functions; torch reorders a call with keyword
    arguments only before 2.14, and drops them there (2.14+ refuses it: GB0296)."""
    add = (
        f"Add {fn} to torch._dynamo.config.reorderable_logging_functions "
        f"(`torch._dynamo.config.reorderable_logging_functions.add({fn})`)"
    )
    config = {"reorderable_logging_functions": setting}
    keywords = _keywords(b.code, fn)
    if not keywords:
        return fix(
            b, cause, f"{add}: Dynamo then {does}. Or {GUARD}.", f"{effect}; the break is gone",
            config=config, code_edit=False,
        )  # fmt: skip
    shown = ", ".join(f"`{k.strip()}`" for k in keywords)
    version = release(b.torch_version or installed())
    if version is None or version >= (2, 14):
        return fix(
            b, cause,
            f"torch reorders only calls without keyword arguments: drop {shown} and "
            f"{add[0].lower()}{add[1:]}; or {GUARD}.",
            f"{effect}; the break is gone",
            config=config,
        )  # fmt: skip
    return fix(
        b, cause,
        f"{add}: Dynamo then {does}, without its keyword arguments ({shown} is dropped: "
        f"torch before 2.14 does not replay them). Or {GUARD}.",
        f"{effect}, without {shown}; the break is gone",
        config=config, code_edit=False,
    )  # fmt: skip


def unreorderable_args(text: str, code: str) -> list[str]:
    """The arguments of a print (torch's break `text`: its gb_type and explanation; the
    line's `code`) that Dynamo cannot defer: where any, reorderable_logging_functions alone
    does not remove the break."""
    types = _arg_types(text)
    if types is None:  # no types in the text: judge by the code
        f_string = re.search(r"\bf[\"']", code)
        sized = re.search(r"\.shape\b|\.size\(\)", code)
        return ["a torch.Size"] if sized and not f_string else []
    return sorted({t for t in types if t not in REORDERABLE_ARGS})


def reorders_alone(text: str, code: str, version: str) -> bool:
    """Whether adding print to reorderable_logging_functions alone removes the break:
    every argument deferrable, and no keyword argument on a torch that refuses them (2.14+).
    `--try-fixes` tries the setting only there (a look saw it tried where the advice said
    it would not do)."""
    v = release(version or installed())
    keywords = _keywords(code, "print") and (v is None or v >= (2, 14))
    return not unreorderable_args(text, code) and not keywords


def _print_fix(b: Break) -> Fix:
    bad = unreorderable_args(b.gb_type + " " + b.explanation, b.code)
    if not bad:
        return _reorder(
            b, "print", "fn:builtins.print", BreakCause.PRINT, "runs it after the graph",
            "the print runs after the graph (with the values it had there)",
        )  # fmt: skip
    what = ", ".join(f"`{t}`" if not t.startswith("a ") else t for t in bad)
    return fix(
        b, BreakCause.PRINT,
        f"print's arguments include {what}, which Dynamo cannot defer (only tensors, "
        "constants and f-strings): print an f-string instead (`print(f\"shape {h.shape}\")`) "
        "and add print to torch._dynamo.config.reorderable_logging_functions, or "
        f"{GUARD}. Adding print to reorderable_logging_functions alone does not remove it.",
        "the print runs after the graph (f-string) or only in eager (guard); the break is gone",
    )  # fmt: skip


STRING_BUILTINS = {"str", "repr", "format", "ascii"}
CODE_BUILTINS = {"exec", "eval", "compile", "globals", "locals", "vars", "breakpoint", "input",
                 "open", "__import__"}  # fmt: skip


@rule("GB0059", "Failed to trace builtin operator")
def _builtin(b: Break) -> Fix:
    name = quoted(r"builtin operator `([^`]+)`", b.explanation) or quoted(
        r"builtin: (\w+)", b.gb_type + " " + b.explanation
    )
    if name == "print" or (not name and re.search(r"\bprint\(", b.code)):
        return _print_fix(b)
    types = _arg_types(b.explanation) or []
    if name in STRING_BUILTINS and any(t in ("Tensor", "Parameter") for t in types):
        return tensor_to_string(b, name)
    if name in CODE_BUILTINS:
        return fix(
            b, BreakCause.PYTHON_BUILTIN,
            f"`{name}()` cannot be traced: move it out of the compiled function (e.g. run it "
            "once at import or in __init__ and keep the result).",
            MOVES_OUT,
        )  # fmt: skip
    shown = f"`{name}`" if name else "this builtin"
    args = f" with arguments {', '.join(types)}" if types else ""
    return fix(
        b, BreakCause.BUILTIN,
        f"Dynamo cannot call {shown}{args}: use a torch op or a form Dynamo supports, or "
        "move the call out of the compiled function.",
        MOVES_OUT,
    )  # fmt: skip


LOGGER_REORDERED = (2, 14)  # the first release that reorders a Logger method (2.13 breaks)
# a Logger method, and those a library adds to logging.Logger (transformers' warning_once)
LOGGER_METHOD = re.compile(
    r"\.((?:debug|info|warning|warn|error|exception|critical)(?:_\w+)?|log)\("
)


@rule("GB0291", "logging.Logger method not supported for non-export cases")
def _logging(b: Break) -> Fix:
    m = LOGGER_METHOD.search(b.code)
    tail = (
        "On this torch reorderable_logging_functions does not help: Dynamo breaks on Logger "
        "methods even when they are in it (torch 2.14 and later reorder them)."
    )
    if not m:
        return fix(
            b, BreakCause.LOGGING,
            "Add the logger method to torch._dynamo.config.ignore_logging_functions (e.g. "
            f"`logging.Logger.info`), or {GUARD}. {tail}",
            "the log call is skipped while compiled (it does not run); the break is gone",
        )  # fmt: skip
    method = m.group(1)
    version = release(b.torch_version or installed())
    if version is not None and version >= LOGGER_REORDERED:
        # (torch 2.14-2.15 run a reordered call after the graph only where the compiled
        # function makes it itself: one in a function Dynamo inlines - a library's property,
        # a helper - is dropped; a look's transformers `loss_type` warning never printed)
        lib = (library_path(b.library_file) or b.library_file) if b.library_file else ""
        inlined = f"this call is in {lib}, which Dynamo inlines" if lib else ""
        return fix(
            b, BreakCause.LOGGING,
            f"Add logging.Logger.{method} to torch._dynamo.config.reorderable_logging_functions "
            f"(`torch._dynamo.config.reorderable_logging_functions.add(logging.Logger.{method})`)"
            ": Dynamo then makes the call after the graph where the compiled function makes "
            "it itself; a call in a function it inlines is dropped (it does not log"
            + (f": {inlined})" if inlined else ")")
            + ". Or add it to ignore_logging_functions (the call is skipped while compiled), "
            f"or {GUARD}.",
            "the break is gone; the log call runs after the graph where the compiled function "
            "makes it itself, else not at all",
            config={"reorderable_logging_functions": f"fn:logging.Logger.{method}"},
            code_edit=False,
        )  # fmt: skip
    return fix(
        b, BreakCause.LOGGING,
        f"Add logging.Logger.{method} to torch._dynamo.config.ignore_logging_functions "
        f"(`torch._dynamo.config.ignore_logging_functions.add(logging.Logger.{method})`), "
        f"or {GUARD}. {tail}",
        "the log call is skipped while compiled (it does not run under torch.compile); the "
        "break is gone",
        config={"ignore_logging_functions": f"fn:logging.Logger.{method}"}, code_edit=False,
    )  # fmt: skip


# --- functions Dynamo does not trace ------------------------------------------------------

STDLIB_C = {"builtins", "posix", "nt", "_thread", "_io", "_warnings", "time", "math", "os",
            "sys", "_random", "_operator", "gc", "select", "_socket"}  # fmt: skip


def _is_stdlib(module: str) -> bool:
    top = module.split(".")[0]
    return top in STDLIB_C or top in getattr(sys, "stdlib_module_names", ())


def _stdlib_call(b: Break, name: str) -> Fix:
    return fix(
        b, BreakCause.PYTHON_BUILTIN,
        f"`{name}` is a C function of Python's standard library that Dynamo cannot "
        "trace: call it outside the compiled function and pass the result in as an "
        f"input, or {GUARD}.",
        MOVES_OUT,
    )  # fmt: skip


@rule("GB9193", "Call to a time function")  # 2.15+; GB0007 before
def _time_call(b: Break) -> Fix:
    return _stdlib_call(b, quoted(r"on `([\w.]+)\(\)`", b.explanation) or "time.time")


def _skipped(b: Break) -> Fix:
    """GB0007/GB0008/GB0009: a function Dynamo does not trace, by which kind it is."""
    text = b.explanation + " " + b.code
    builtin = quoted(r"(?:the builtin|Python builtin) `([\w.]+?)\.?`", b.explanation)
    if builtin in ("_warnings.warn", "warnings.warn") or (
        not builtin and re.search(r"\bwarnings\.warn\(", b.code)
    ):
        return _reorder(
            b, "warnings.warn", "fn:warnings.warn", BreakCause.WARNING,
            "issues the warning after the graph", "the warning is issued after the graph",
        )  # fmt: skip
    if "optree" in b.explanation:
        return fix(
            b, BreakCause.OPTREE,
            "Use torch.utils._pytree (which Dynamo traces) instead of optree's C functions.",
            REMOVES,
        )  # fmt: skip
    if builtin == "builtins.__build_class__":
        return constant("GB8977", b)
    if builtin:
        module = builtin.rsplit(".", 1)[0] if "." in builtin else "builtins"
        if _is_stdlib(module):
            return _stdlib_call(b, builtin)
        # nonstrict_trace traces the call as torch ops without Dynamo; before it (2.6),
        # allow_in_graph, which takes tensors only
        opaque = nonstrict_trace(b.torch_version or installed()) or "torch.compiler.allow_in_graph"
        return fix(
            b, BreakCause.UNSUPPORTED_CALL,
            f"`{builtin}` is a C/C++ extension function Dynamo cannot look into: wrap it as a "
            "custom op (torch.library.custom_op, with a fake kernel) so it stays in the graph, "
            f"or, if it only calls torch ops, wrap the call in a function decorated with "
            f"@{opaque}.",
            "the call stays in the graph as one op; the break is gone",
        )  # fmt: skip
    fn = quoted(r"the function `([^`]+)`", b.explanation)
    where = quoted(r"in file `([^`]+)`", b.explanation).replace("\\", "/")
    if "torch.compiler.disable" in b.explanation or "_disable_dynamo" in b.explanation:
        return _compiler_disable(b)
    if in_torch(where) or where.startswith(("torch/", "_dynamo/")) or "module: torch" in text:
        if fn in ("disable", "graph_break"):
            return fix(
                b, BreakCause.COMPILER_DISABLE,
                f"Don't call torch._dynamo.{fn}() inside the compiled function: apply "
                "torch.compiler.disable where the function is defined, outside the model.",
                REMOVES,
            )  # fmt: skip
        shown = f"torch's `{fn}`" if fn else "This torch function"
        extra = " (seed once before calling the model)" if "seed" in fn else ""
        return fix(
            b,
            BreakCause.TORCH_UNTRACEABLE,
            f"{shown} is not traceable by design: call it outside the compiled function{extra}.",
            MOVES_OUT,
        )
    if fn:
        src = f" ({Path(where).name})" if where else ""
        return fix(
            b, BreakCause.SKIPPED_FUNCTION,
            f"Dynamo skips `{fn}`{src} on purpose. Call it outside the compiled function; or "
            "let Dynamo trace into it: torch._dynamo.config.dont_skip_tracing = True (for all "
            "skipped files), or the @torch._dynamo.dont_skip_tracing decorator on a function "
            "of yours that calls it.",
            "Dynamo traces into the skipped function instead of breaking (with the setting: "
            "into every skipped file); the break is gone where that code traces",
            config={"dont_skip_tracing": True}, code_edit=False,
        )  # fmt: skip
    return fix(
        b, BreakCause.SKIPPED_FUNCTION,
        "Dynamo does not trace this function: call it outside the compiled function.",
        MOVES_OUT,
    )  # fmt: skip


rule("GB0007", "Attempted to call function marked as skipped")(_skipped)
rule("GB0008", "Attempted to inline function marked as skipped")(_skipped)
rule("GB0009", "Attempted to inline function marked as skipped (SkipFunctionVariable)")(_skipped)


@rule("GB0098", "Skip calling `torch.compiler.disable()`d function")
def _compiler_disable(b: Break) -> Fix:
    fn = quoted(r"function `<function ([\w.<>]+)", b.explanation)
    shown = f"`{fn.rsplit('.', 1)[-1]}`" if fn else "This function"
    return fix(
        b, BreakCause.COMPILER_DISABLE,
        f"{shown} is wrapped in torch.compiler.disable (or torch._dynamo.disable), so Dynamo "
        "stops the graph around it: remove the decorator if the function traces, or call it "
        "outside the compiled model.",
        # (a look removed one and got two breaks: its float(t.std()) broke in its place)
        "removes this break where the function traces; one that reads a tensor's value "
        "(float(t), .item()) breaks there instead, and one that adds to a list or dict it "
        "keeps (a metrics hook) compiles again each call, torch guarding on its length: "
        "keep the decorator there",
    )  # fmt: skip


@rule("GB0148", "Unsupported function call (delayed)")
def _delayed(b: Break) -> Fix:
    if "torch.compiler.disable" in b.explanation:
        return _compiler_disable(b)
    reason = quoted(r"Reason: (.+)$", b.explanation)
    if "allow_rnn" in b.explanation:
        return _allow_rnn(b)
    return fix(
        b, BreakCause.UNSUPPORTED_CALL,
        f"Dynamo will not trace this call ({reason or 'see the explanation'}): call it outside "
        "the compiled function.",
        MOVES_OUT,
    )  # fmt: skip


@rule("GB0014", "Attempted to wrap RNN, GRU, or LSTM")
def _allow_rnn(b: Break) -> Fix:
    return fix(
        b, BreakCause.UNSUPPORTED_CALL,
        "Set torch._dynamo.config.allow_rnn = True before the first call (torch's "
        "experimental support for RNN, GRU and LSTM): Dynamo then traces the recurrent "
        "module into the graph. Or call it outside the compiled function.",
        "the recurrent module is traced into the graph; the break is gone",
        config={"allow_rnn": True}, code_edit=False,
    )  # fmt: skip
