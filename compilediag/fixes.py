"""What to change for each graph break, and what the change does.

Every break torch 2.8+ reports carries a GB id (`GB0059`) and a gb_type (`Failed to trace
builtin operator`); torch ships the list of them, with hints, as
`torch/_dynamo/graph_break_registry.json`. `fix_for()` answers a break with a `Fix`:

1. compilediag's own fix for that GB id (`RULES`), where there is one: a specific change,
   checked against torch (the config-level ones by applying them, tests/test_fixes.py);
2. else torch's own hints for the break (the registry's, or the ones in the break text):
   the floor, for every gb_type in the registry;
3. else, for a break text of torch before 2.8 (no id, no hints), the patterns of
   `LEGACY`, which lead to the same rules;
4. else the generic advice.

The lookup goes by GB id first, then by gb_type text, then by torch's explanation text
(the registry's explanation templates), then by the legacy patterns.

A config-level fix names the torch._dynamo.config settings that apply it (`Fix.config`),
so a fix can be tried without editing the model: a value `"fn:logging.Logger.info"` is that
function, added to the setting (a set); `config_patch()` turns the mapping into arguments
for `torch._dynamo.config.patch`.

No torch import here: the registry is read from the installed torch package's folder,
found without importing torch, on first use.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import json
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from compilediag.torch_releases import installed, nonstrict_trace, release

Source = Literal["compilediag", "torch registry", "torch hints", "generic"]

# effects, in the words a report shows
REMOVES = "removes the break"
MOVES_OUT = "moves the call out of the compiled region; the break is gone"
GENERIC_TEXT = "See the explanation and hints above, and the linked page where there is one."


@dataclass(frozen=True)
class Fix:
    """One fix for one break."""

    cause: str  # compilediag's name for the cause: print, logging, item, ...
    text: str  # what to change
    effect: str  # what the change does: "removes the break", "the print runs after ..."
    # torch._dynamo.config settings that apply the fix, when it is a config-level one;
    # a value "fn:module.qualname" is that function, added to the setting (a set)
    config: Mapping[str, object] = field(default_factory=dict)
    code_edit: bool = True  # the fix needs an edit of the user's code
    source: Source = "compilediag"
    gb_id: str | None = None

    @property
    def specific(self) -> bool:
        """compilediag's own fix (not torch's hints, not the generic advice)."""
        return self.source == "compilediag"

    @property
    def suggestion(self) -> str:
        """The fix as one line of a report."""
        if self.source == "compilediag":
            return f"{self.text} Expected: {self.effect}."
        return self.text

    def __post_init__(self) -> None:  # frozen: the settings too
        object.__setattr__(self, "config", MappingProxyType(dict(self.config)))

    def patch(self) -> dict[str, Any]:
        """Arguments for `torch._dynamo.config.patch` that apply this fix (needs torch)."""
        return config_patch(self.config)


GENERIC = Fix("other", GENERIC_TEXT, "unknown", code_edit=True, source="generic")


def config_patch(config: Mapping[str, object]) -> dict[str, Any]:
    """`Fix.config` as arguments for `torch._dynamo.config.patch`: a "fn:" value becomes
    the setting's current set with that function added."""
    import torch

    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, str) and value.startswith("fn:"):
            current = set(getattr(torch._dynamo.config, key))
            out[key] = current | {resolve_function(value[3:])}
        else:
            out[key] = value
    return out


def resolve_function(path: str) -> Any:
    """`logging.Logger.info` -> the function: the longest importable module, then attributes."""
    parts = path.split(".")
    for i in range(len(parts) - 1, 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(f"no module in {path!r}")


# --- torch's registry -----------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One entry of torch's graph_break_registry.json."""

    gb_id: str
    gb_type: str
    explanation: str
    hints: tuple[str, ...]


def registry_path() -> Path | None:
    """torch/_dynamo/graph_break_registry.json of the installed torch (torch not imported)."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder) / "_dynamo" / "graph_break_registry.json"
        if path.is_file():
            return path
    return None


@functools.lru_cache(maxsize=1)
def registry() -> dict[str, list[Entry]]:
    """GB id -> its entries (a GB id may have several: the same break raised at several
    places); empty where torch is not installed or ships no registry (before 2.8)."""
    path = registry_path()
    if path is None:
        return {}
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    out: dict[str, list[Entry]] = {}
    for gb_id, entries in raw.items():
        for e in entries if isinstance(entries, list) else []:
            out.setdefault(gb_id, []).append(
                Entry(
                    gb_id,
                    str(e.get("Gb_type", "")),
                    str(e.get("Explanation", "")),
                    tuple(join_hints(e.get("Hints") or [])),
                )
            )
    return out


@functools.lru_cache(maxsize=1)
def registry_types() -> dict[str, list[str]]:
    """gb_type -> the GB ids that carry it (registry, then compilediag's own rules)."""
    out: dict[str, list[str]] = {}
    for gb_id, entries in registry().items():
        for e in entries:
            ids = out.setdefault(e.gb_type, [])
            if gb_id not in ids:
                ids.append(gb_id)
    for gb_id, rule in RULES.items():
        for t in rule.gb_types:
            ids = out.setdefault(t, [])
            if gb_id not in ids:
                ids.append(gb_id)
    return out


def join_hints(fragments: Iterable[str]) -> list[str]:
    """The registry splits a hint written as adjacent string literals into its pieces
    (`"Set ... = True "`, `"or export ..."`); torch prints them as one. A piece that ends
    or starts with a space continues the hint before it."""
    hints: list[str] = []
    glue = False
    for frag in fragments:
        frag = str(frag)
        if hints and (glue or frag[:1].isspace()):
            hints[-1] = hints[-1].rstrip() + " " + frag.strip()
        else:
            hints.append(frag.strip())
        glue = frag[-1:].isspace()
    return [h for h in hints if h]


# placeholders of the registry's texts: `{fn.__name__}`, `{self.value}`
_PLACEHOLDER = re.compile(r"\{[^{}]*\}")
BOILERPLATE = re.compile(
    r"^(It may be possible to write Dynamo tracing rules|Please report an issue to PyTorch"
    r"|Please file an issue|File an issue to PyTorch|Report an issue to PyTorch"
    r"|This graph break may have been caused by an earlier graph break)",
    re.I,
)


def _fill(text: str) -> str:
    return _PLACEHOLDER.sub("…", text)


@functools.lru_cache(maxsize=1)
def _explanation_patterns() -> list[tuple[re.Pattern[str], int, str]]:
    """(pattern, literal length, GB id) for each registry explanation with enough words
    to recognise it by (`explanation` or `msg` are names of variables, not texts)."""
    out = []
    for gb_id, entries in registry().items():
        for e in entries:
            parts = _PLACEHOLDER.split(e.explanation)
            literal = sum(len(p.strip()) for p in parts)
            if literal < 20 or " " not in e.explanation:
                continue
            body = ".*?".join(re.escape(p) for p in parts)
            out.append((re.compile(body, re.S), literal, gb_id))
    return out


def ids_for_explanation(explanation: str) -> list[str]:
    """The GB id whose explanation template matches torch's explanation text; none when
    the best match is shared by several ids."""
    text = explanation.strip()
    if not text:
        return []
    best: dict[str, int] = {}
    for pattern, literal, gb_id in _explanation_patterns():
        if pattern.match(text):
            best[gb_id] = max(best.get(gb_id, 0), literal)
    if not best:
        return []
    top = max(best.values())
    ids = [i for i, n in best.items() if n == top]
    return ids if len(ids) == 1 else []


UNCHECKED = "torch's hint; compilediag has not checked it"


def floor_fix(gb_id: str | None, hints: Sequence[str]) -> Fix | None:
    """torch's own hints as the fix: the break's own (filled in), else the registry's."""
    known = gb_id is not None and gb_id in registry()
    useful = [h for h in hints if h and not BOILERPLATE.match(h)]
    if not useful and gb_id is not None and known:
        every = dict.fromkeys(h for e in registry()[gb_id] for h in e.hints)
        useful = [_fill(h) for h in every if not BOILERPLATE.match(h)]
    source: Source = "torch registry" if known else "torch hints"
    if useful:
        text = " ".join(h if h.endswith((".", "`", ")")) else h + "." for h in useful)
    elif known:
        text = (
            "torch has no fix for this break beyond reporting it: keep this code out of the "
            "compiled region (call it before or after the compiled function)."
        )
    else:
        return None
    return Fix("other", text, UNCHECKED, source=source, gb_id=gb_id)


# --- the break, as the rules see it ----------------------------------------------------


@dataclass(frozen=True)
class Break:
    gb_id: str | None
    gb_type: str
    explanation: str
    hints: tuple[str, ...]
    code: str
    library_file: str | None
    torch_version: str = ""  # the torch that broke: advice names only what it has

    @property
    def text(self) -> str:
        return " ".join((self.gb_type, self.explanation, self.code))


@dataclass(frozen=True)
class Rule:
    gb_types: tuple[str, ...]
    make: Callable[[Break], Fix]


RULES: dict[str, Rule] = {}


def rule(gb_id: str, *gb_types: str) -> Callable[[Callable[[Break], Fix]], Callable[[Break], Fix]]:
    def register(fn: Callable[[Break], Fix]) -> Callable[[Break], Fix]:
        RULES[gb_id] = Rule(gb_types, fn)
        return fn

    return register


def _fix(b: Break, cause: str, text: str, effect: str, **kw: Any) -> Fix:
    return Fix(cause, text, effect, gb_id=b.gb_id, **kw)


def _quoted(pattern: str, text: str) -> str:
    m = re.search(pattern, text)
    return m.group(1) if m else ""


GUARD = "guard it with `if not torch.compiler.is_compiling():` (it then runs only in eager)"

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


def _reorder(b: Break, fn: str, setting: str, what: str, does: str, effect: str) -> Fix:
    """Add `fn` to reorderable_logging_functions; torch reorders a call with keyword
    arguments only before 2.14, and drops them there (2.14+ refuses it: GB0296)."""
    add = (
        f"Add {fn} to torch._dynamo.config.reorderable_logging_functions "
        f"(`torch._dynamo.config.reorderable_logging_functions.add({fn})`)"
    )
    config = {"reorderable_logging_functions": setting}
    keywords = _keywords(b.code, fn)
    if not keywords:
        return _fix(
            b, what, f"{add}: Dynamo then {does}. Or {GUARD}.", f"{effect}; the break is gone",
            config=config, code_edit=False,
        )  # fmt: skip
    shown = ", ".join(f"`{k.strip()}`" for k in keywords)
    version = release(b.torch_version or installed())
    if version is None or version >= (2, 14):
        return _fix(
            b, what,
            f"torch reorders only calls without keyword arguments: drop {shown} and "
            f"{add[0].lower()}{add[1:]}; or {GUARD}.",
            f"{effect}; the break is gone",
            config=config,
        )  # fmt: skip
    return _fix(
        b, what,
        f"{add}: Dynamo then {does}, without its keyword arguments ({shown} is dropped: "
        f"torch before 2.14 does not replay them). Or {GUARD}.",
        f"{effect}, without {shown}; the break is gone",
        config=config, code_edit=False,
    )  # fmt: skip


def _print_fix(b: Break) -> Fix:
    types = _arg_types(b.gb_type + " " + b.explanation)
    if types is None:  # no types in the text: judge by the code
        f_string = re.search(r"\bf[\"']", b.code)
        sized = re.search(r"\.shape\b|\.size\(\)", b.code)
        bad = ["a torch.Size"] if sized and not f_string else []
    else:
        bad = sorted({t for t in types if t not in REORDERABLE_ARGS})
    if not bad:
        return _reorder(
            b, "print", "fn:builtins.print", "print", "runs it after the graph",
            "the print runs after the graph (with the values it had there)",
        )  # fmt: skip
    what = ", ".join(f"`{t}`" if not t.startswith("a ") else t for t in bad)
    return _fix(
        b, "print",
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
    name = _quoted(r"builtin operator `([^`]+)`", b.explanation) or _quoted(
        r"builtin: (\w+)", b.gb_type + " " + b.explanation
    )
    if name == "print" or (not name and re.search(r"\bprint\(", b.code)):
        return _print_fix(b)
    types = _arg_types(b.explanation) or []
    if name in STRING_BUILTINS and any(t in ("Tensor", "Parameter") for t in types):
        return _tensor_to_string(b, name)
    if name in CODE_BUILTINS:
        return _fix(
            b, "python_builtin",
            f"`{name}()` cannot be traced: move it out of the compiled function (e.g. run it "
            "once at import or in __init__ and keep the result).",
            MOVES_OUT,
        )  # fmt: skip
    shown = f"`{name}`" if name else "this builtin"
    args = f" with arguments {', '.join(types)}" if types else ""
    return _fix(
        b, "builtin",
        f"Dynamo cannot call {shown}{args}: use a torch op or a form Dynamo supports, or "
        "move the call out of the compiled function.",
        MOVES_OUT,
    )  # fmt: skip


LOGGER_METHOD = re.compile(r"\.(debug|info|warning|warn|error|exception|critical|log)\(")


@rule("GB0291", "logging.Logger method not supported for non-export cases")
def _logging(b: Break) -> Fix:
    m = LOGGER_METHOD.search(b.code)
    tail = (
        "reorderable_logging_functions does not help here: Dynamo breaks on Logger methods "
        "even when they are in it."
    )
    if not m:
        return _fix(
            b, "logging",
            "Add the logger method to torch._dynamo.config.ignore_logging_functions (e.g. "
            f"`logging.Logger.info`), or {GUARD}. {tail}",
            "the log call is skipped while compiled (it does not run); the break is gone",
        )  # fmt: skip
    method = m.group(1)
    return _fix(
        b, "logging",
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
    return _fix(
        b, "python_builtin",
        f"`{name}` is a C function of Python's standard library that Dynamo cannot "
        "trace: call it outside the compiled function and pass the result in as an "
        f"input, or {GUARD}.",
        MOVES_OUT,
    )  # fmt: skip


@rule("GB9193", "Call to a time function")  # 2.15+; GB0007 before
def _time_call(b: Break) -> Fix:
    return _stdlib_call(b, _quoted(r"on `([\w.]+)\(\)`", b.explanation) or "time.time")


def _skipped(b: Break) -> Fix:
    """GB0007/GB0008/GB0009: a function Dynamo does not trace, by which kind it is."""
    text = b.explanation + " " + b.code
    builtin = _quoted(r"(?:the builtin|Python builtin) `([\w.]+?)\.?`", b.explanation)
    if builtin in ("_warnings.warn", "warnings.warn") or (
        not builtin and re.search(r"\bwarnings\.warn\(", b.code)
    ):
        return _reorder(
            b, "warnings.warn", "fn:warnings.warn", "warning",
            "issues the warning after the graph", "the warning is issued after the graph",
        )  # fmt: skip
    if "optree" in b.explanation:
        return _fix(
            b, "optree",
            "Use torch.utils._pytree (which Dynamo traces) instead of optree's C functions.",
            REMOVES,
        )  # fmt: skip
    if builtin == "builtins.__build_class__":
        return _class_definition(b)
    if builtin:
        module = builtin.rsplit(".", 1)[0] if "." in builtin else "builtins"
        if _is_stdlib(module):
            return _stdlib_call(b, builtin)
        # nonstrict_trace traces the call as torch ops without Dynamo; before it (2.6),
        # allow_in_graph, which takes tensors only
        opaque = nonstrict_trace(b.torch_version or installed()) or "torch.compiler.allow_in_graph"
        return _fix(
            b, "unsupported_call",
            f"`{builtin}` is a C/C++ extension function Dynamo cannot look into: wrap it as a "
            "custom op (torch.library.custom_op, with a fake kernel) so it stays in the graph, "
            f"or, if it only calls torch ops, wrap the call in a function decorated with "
            f"@{opaque}.",
            "the call stays in the graph as one op; the break is gone",
        )  # fmt: skip
    fn = _quoted(r"the function `([^`]+)`", b.explanation)
    where = _quoted(r"in file `([^`]+)`", b.explanation).replace("\\", "/")
    if "torch.compiler.disable" in b.explanation or "_disable_dynamo" in b.explanation:
        return _compiler_disable(b)
    if "/torch/" in where or where.startswith(("torch/", "_dynamo/")) or "module: torch" in text:
        if fn in ("disable", "graph_break"):
            return _fix(
                b, "compiler_disable",
                f"Don't call torch._dynamo.{fn}() inside the compiled function: apply "
                "torch.compiler.disable where the function is defined, outside the model.",
                REMOVES,
            )  # fmt: skip
        shown = f"torch's `{fn}`" if fn else "This torch function"
        extra = " (seed once before calling the model)" if "seed" in fn else ""
        return _fix(
            b, "torch_untraceable",
            f"{shown} is not traceable by design: call it outside the compiled "
            f"function{extra}.",
            MOVES_OUT,
        )  # fmt: skip
    if fn:
        src = f" ({Path(where).name})" if where else ""
        return _fix(
            b, "skipped_function",
            f"Dynamo skips `{fn}`{src} on purpose. Call it outside the compiled function; or "
            "let Dynamo trace into it: torch._dynamo.config.dont_skip_tracing = True (for all "
            "skipped files), or the @torch._dynamo.dont_skip_tracing decorator on a function "
            "of yours that calls it.",
            "Dynamo traces into the skipped function instead of breaking (with the setting: "
            "into every skipped file); the break is gone where that code traces",
            config={"dont_skip_tracing": True}, code_edit=False,
        )  # fmt: skip
    return _fix(
        b, "skipped_function",
        "Dynamo does not trace this function: call it outside the compiled function.",
        MOVES_OUT,
    )  # fmt: skip


rule("GB0007", "Attempted to call function marked as skipped")(_skipped)
rule("GB0008", "Attempted to inline function marked as skipped")(_skipped)
rule("GB0009", "Attempted to inline function marked as skipped (SkipFunctionVariable)")(_skipped)


@rule("GB0098", "Skip calling `torch.compiler.disable()`d function")
def _compiler_disable(b: Break) -> Fix:
    fn = _quoted(r"function `<function ([\w.<>]+)", b.explanation)
    shown = f"`{fn.rsplit('.', 1)[-1]}`" if fn else "This function"
    return _fix(
        b, "compiler_disable",
        f"{shown} is wrapped in torch.compiler.disable (or torch._dynamo.disable), so Dynamo "
        "stops the graph around it: remove the decorator if the function traces, or call it "
        "outside the compiled model.",
        "removes the break (once the function is traced into the graph)",
    )  # fmt: skip


@rule("GB0148", "Unsupported function call (delayed)")
def _delayed(b: Break) -> Fix:
    if "torch.compiler.disable" in b.explanation:
        return _compiler_disable(b)
    reason = _quoted(r"Reason: (.+)$", b.explanation)
    return _fix(
        b, "unsupported_call",
        f"Dynamo will not trace this call ({reason or 'see the explanation'}): call it outside "
        "the compiled function.",
        MOVES_OUT,
    )  # fmt: skip


@rule("GB0025", "Call to `torch._dynamo.graph_break()`")
def _graph_break(b: Break) -> Fix:
    return _fix(
        b, "explicit_graph_break",
        "This break is on purpose: remove the torch._dynamo.graph_break() call (keep it only "
        "if the code after it cannot be compiled).",
        REMOVES,
    )  # fmt: skip


@rule("GB4636", "Call to `torch._dynamo.step_unsupported()`")
def _step(b: Break) -> Fix:
    return _fix(
        b, "explicit_graph_break",
        "Remove the `torch._dynamo.step_unsupported()` call: it is a debugging aid that stops "
        "the graph and skips the rest of the function.",
        REMOVES,
    )  # fmt: skip


rule("GB0275", "torch._dynamo.step_unsupported() with empty checkpoint")(_step)


# --- data-dependent values and shapes --------------------------------------------------------

CONTROL_FLOW = re.compile(r"^\s*(if|elif|while|assert)\b|\bif\b.*\belse\b|\brange\(")


def _scalar_fix(b: Break, what: str) -> Fix:
    return _fix(
        b, "item",
        f"Set torch._dynamo.config.capture_scalar_outputs = True so {what} is traced as a "
        "symbolic scalar; or keep the value a 0-d tensor instead.",
        "the scalar stays in the graph (an unbacked symbol); the break is gone",
        config={"capture_scalar_outputs": True}, code_edit=False,
    )  # fmt: skip


@rule("GB0124", "Unsupported Tensor.item() call with capture_scalar_outputs=False")
def _item(b: Break) -> Fix:
    if CONTROL_FLOW.search(b.code):
        return _fix(
            b, "item_branch",
            "The .item() value steers Python control flow, so capture_scalar_outputs alone "
            "only moves the break to the branch: keep it a tensor and pick with "
            "torch.where(cond, a, b), or use torch.cond(pred, true_fn, false_fn, operands).",
            REMOVES,
        )  # fmt: skip
    return _scalar_fix(b, ".item()")


@rule("GB0033", "Data dependent operator")
def _data_dependent_op(b: Break) -> Fix:
    op = _quoted(r"Operator `([\w.]+)`", b.explanation)
    if op.startswith("aten._local_scalar_dense") and not CONTROL_FLOW.search(b.code):
        return _scalar_fix(b, "the tensor -> Python number conversion (.item(), .tolist())")
    if op.startswith("aten.equal"):
        return _fix(
            b, "data_dependent_op",
            "torch.equal returns a Python bool from the data: compare as a tensor, "
            "`torch.all(a == b)` (shapes equal), and pick results with torch.where instead of "
            "`if`; or compare outside the compiled function.",
            REMOVES,
        )  # fmt: skip
    if CONTROL_FLOW.search(b.code):
        return _data_branch(b)
    shown = f"`{op}`" if op else "This operator"
    return _fix(
        b, "data_dependent_op",
        f"{shown} returns a Python value computed from tensor data: keep the result a tensor, "
        "or wrap the computation as a custom op (torch.library.custom_op).",
        REMOVES,
    )  # fmt: skip


@rule("GB0170", "Data-dependent branching")
def _data_branch(b: Break) -> Fix:
    return _fix(
        b, "data_dependent_branch",
        "Make the branch tensor-valued: compute both sides and pick with "
        "torch.where(cond, a, b), or use torch.cond(pred, true_fn, false_fn, operands) for "
        "real control flow.",
        REMOVES,
    )  # fmt: skip


@rule("GB0109", "Tensor.tolist() with non-integer tensor")
def _tolist(b: Break) -> Fix:
    return _fix(
        b, "tolist",
        "Keep the values in the tensor (index it, `h[0]`) instead of calling .tolist(); "
        "Dynamo traces .tolist() only on integer tensors (with capture_scalar_outputs = True).",
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
    return _quoted(r"(aten\.\w+\.\w+|aten\.\w+)", b.explanation + " " + b.gb_type)


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
    return _fix(
        b, "dynamic_output_shape_no_meta",
        f"{shown} has no meta kernel for a data-dependent output shape, so Dynamo cannot "
        f"trace it ({why}). Replace it with {alt}, or call it outside the compiled function.",
        REMOVES,
    )  # fmt: skip


@rule("GB0036", "Dynamic shape operator")
def _dynamic_shape(b: Break) -> Fix:
    op = _op(b)
    if op and has_dynamic_meta(op) is False:
        return _no_meta(b, op, configured=False)
    return _fix(
        b, "dynamic_output_shape",
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
    name = _quoted(r"function (?:<built-in function |<function )?(\w+)", b.explanation)
    alt = NUMPY_ALTERNATIVES.get(name)
    shown = f"np.{name}" if name else "This NumPy function"
    use = f"use {alt} instead" if alt else "use the torch op that does the same"
    return _fix(
        b, "numpy",
        f"{shown} has no counterpart in torch._numpy, Dynamo's NumPy: {use} (on the tensor), "
        "or move this step out of the compiled function.",
        REMOVES,
    )  # fmt: skip


def _ndarray(b: Break) -> Fix:
    name = _quoted(r"ndarray\.(\w+)", b.explanation)
    shown = f"`ndarray.{name}`" if name else "This ndarray method"
    return _fix(
        b, "numpy",
        f"{shown} is not modelled by torch._numpy, Dynamo's NumPy: do this step with torch "
        "ops on the tensor, or move it out of the compiled function.",
        REMOVES,
    )  # fmt: skip


rule("GB0158", "Unsupported ndarray method call")(_ndarray)
rule("GB0157", "Unsupported ndarray attribute access")(_ndarray)
rule("GB0159", "Unsupported ndarray.__version__ access")(_ndarray)


@rule("GB0250", "ndarray.astype(object)")
def _astype_object(b: Break) -> Fix:
    return _fix(
        b, "numpy",
        "NumPy object arrays have no torch counterpart: keep numbers in tensors inside the "
        "compiled function and build the Python objects outside it.",
        MOVES_OUT,
    )  # fmt: skip


# --- custom ops and fake kernels ---------------------------------------------------------------

CUSTOM_OP = re.compile(r"torch\.ops\.(\w+)\.(\w+)")


def _fake_kernel_fix(b: Break, raises: bool) -> Fix:
    m = CUSTOM_OP.search(b.code) or re.search(r"call_function (\w+)\.(\w+)\(", b.explanation)
    name = f"{m.group(1)}::{m.group(2)}" if m else "ns::op"
    what = "raises NotImplementedError" if raises else "is missing"
    return _fix(
        b, "missing_fake_kernel",
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
    return _fix(
        b, "fake_tensor",
        "An op of this line cannot run on fake tensors: if it is a custom op, give it a fake "
        "kernel (torch.library.register_fake); if it is a torch op, move the call out of the "
        "compiled function and report it to PyTorch.",
        MOVES_OUT,
    )  # fmt: skip


# --- context managers, side effects, higher-order ops ---------------------------------------


def _context(b: Break) -> Fix:
    kind = _quoted(r"enter a `([^`]+)` context manager", b.explanation) or _quoted(
        r"<class '([\w.]+)'> not supported", b.explanation
    )
    shown = f"a `{kind}`" if kind else "this"
    return _fix(
        b, "context_manager",
        f"Dynamo cannot enter {shown} context manager: move the `with` block out of the "
        "compiled function (around the call to the model). torch's own ones (no_grad, "
        "autocast, set_grad_enabled) work when they are created inside the compiled function.",
        "moves the `with` block out of the compiled region; the break is gone",
    )  # fmt: skip


rule("GB0142", "Unsupported context manager")(_context)
rule("GB0262", "unsupported contextlib.* API")(_context)


@rule("GB0066", "Graph break under GenericContextWrappingVariable")
def _break_in_context(b: Break) -> Fix:
    return _fix(
        b, "context_manager",
        "A break inside a `with` block of a context manager Dynamo cannot resume across makes "
        "it run the whole function in eager: fix the break inside the block (reported with "
        "it), or move the `with` block out of the compiled function.",
        "the function compiles again (up to the remaining breaks)",
    )  # fmt: skip


@rule("GB7000", "graph break in loop")
def _break_in_loop(b: Break) -> Fix:
    return _fix(
        b, "break_in_loop",
        "A break inside a for/while loop makes Dynamo run the whole function in eager: fix the "
        "break inside the loop (reported with it).",
        "the function compiles again (up to the remaining breaks)",
    )  # fmt: skip


@rule("GB0067", "HOP: Unsafe side effect")
def _hop_side_effect(b: Break) -> Fix:
    if "checkpoint" in b.text or any("checkpoint" in h for h in b.hints) or not b.explanation:
        return _fix(
            b, "checkpoint_side_effect",
            "The checkpointed function mutates state from outside it (a list, a dict, an "
            "attribute). If it need not run again when backward recomputes the function, set "
            "torch._dynamo.config.skip_fwd_side_effects_in_bwd_under_checkpoint = True; else "
            "move the mutation out of the checkpointed function.",
            "the side effect runs in forward only (not again when backward recomputes); the "
            "break is gone",
            config={"skip_fwd_side_effects_in_bwd_under_checkpoint": True}, code_edit=False,
        )  # fmt: skip
    return _fix(
        b, "hop_side_effect",
        "The function given to torch.cond / the higher-order op mutates a variable from "
        "outside it: return the new value from the function instead.",
        REMOVES,
    )  # fmt: skip


@rule("GB4413", "HOP: Non-nullified side effect")
def _hop_non_nullified(b: Break) -> Fix:
    return _fix(
        b, "hop_side_effect",
        "The higher-order op's function leaves an outer variable changed: restore it before "
        "the function returns, or return the new value instead of mutating.",
        REMOVES,
    )  # fmt: skip


# --- Python constructs ---------------------------------------------------------------------


@rule("GB0207", "sort with non-constant keys")
def _sort(b: Break) -> Fix:
    return _fix(
        b, "sort_tensors",
        "sorted() of tensors needs their values in Python: stack them and sort in torch "
        "(`torch.stack(items).sort().values`).",
        REMOVES,
    )  # fmt: skip


def _tensor_to_string(b: Break, name: str) -> Fix:
    return _fix(
        b, "tensor_to_string",
        f"`{name}()` of a tensor needs its values in Python: format it outside the "
        f"compiled function, or {GUARD}. To log it, print the tensor itself (print in "
        "reorderable_logging_functions).",
        MOVES_OUT,
    )  # fmt: skip


@rule("GB0569", "repr() on tensor")  # 2.14+; GB0059 before
def _tensor_repr(b: Break) -> Fix:
    name = _quoted(r"\b(str|repr|format|ascii)\(", b.code) or "repr"
    return _tensor_to_string(b, name)


ITERATORS = ("zip", "map", "enumerate", "filter", "reversed", "dict_items", "dict_keys",
             "dict_values", "list_iterator", "tuple_iterator", "range_iterator")  # fmt: skip


def _iterator_input(b: Break, kind: str) -> Fix:
    return _fix(
        b, "iterator_input",
        f"An iterator (`{kind}`) made outside the compiled function can't be traced: pass a list "
        "or tuple in (`list(zip(...))`), or build the iterator inside the function.",
        REMOVES,
    )  # fmt: skip


@rule("GB0156", "Unsupported method call")
def _method(b: Break) -> Fix:
    method = _quoted(r"method `([^`]+)`", b.explanation)
    cls = _quoted(r"of class `([^`]+)`", b.explanation)
    if cls in ITERATORS and method in ("__iter__", "__next__", ""):
        return _iterator_input(b, cls)
    if method == "data_ptr":
        return _fix(
            b, "data_ptr",
            f"`{cls}.data_ptr()` (a memory address) cannot be traced: compare storages "
            "outside the compiled function, or drop the check.",
            MOVES_OUT,
        )  # fmt: skip
    where = f" (inside {Path(b.library_file).name})" if b.library_file else ""
    shown = f"`{cls}.{method}`" if method else "this method"
    return _fix(
        b, "unsupported_call",
        f"Dynamo cannot trace {shown}{where}: avoid it in the compiled function, or call it "
        "outside.",
        MOVES_OUT,
    )  # fmt: skip


@rule("GB9493", "C-implemented special method without VariableTracker model")  # 2.14+
def _c_special_method(b: Break) -> Fix:
    kind = _quoted(r"'([\w.]+)' implements", b.explanation)
    method = _quoted(r"implements '(\w+)'", b.explanation)
    if kind in ITERATORS and method in ("__iter__", "__next__", ""):
        return _iterator_input(b, kind)
    where = f" (inside {Path(b.library_file).name})" if b.library_file else ""
    shown = f"`{kind}.{method}`" if kind and method else "this object's C method"
    return _fix(
        b, "unsupported_call",
        f"Dynamo has no model of {shown}{where}, a method written in C: convert the object "
        "to a list, tuple or dict before it reaches the compiled code, or call it outside.",
        MOVES_OUT,
    )  # fmt: skip


@rule("GB0811", "missing tp_iter")
def _no_iter(b: Break) -> Fix:
    kind = _quoted(r"iterate over `(?:UserDefinedObjectVariable\()?(\w+)", b.explanation)
    if kind in ITERATORS or re.search(r"\bzip|\bmap|enumerate", b.explanation):
        return _iterator_input(b, kind or "zip")
    return _fix(
        b, "unsupported_call",
        f"Dynamo cannot iterate over this object{f' (`{kind}`)' if kind else ''}: pass a "
        "list or tuple instead.",
        REMOVES,
    )  # fmt: skip


@rule("GB8977", "Invalid call to __build_class__")
def _class_definition(b: Break) -> Fix:
    return _fix(
        b, "class_definition",
        "Define the class at module level, outside the compiled function.",
        REMOVES,
    )  # fmt: skip


@rule("GB0092", "Reconstruction failure")
def _reconstruction(b: Break) -> Fix:
    return _fix(
        b, "unreconstructable_output",
        "The compiled function returns (or keeps across a break) a value Dynamo cannot rebuild, "
        "such as a bound method of an object made inside it: return tensors, numbers or the "
        "object itself, and make the callable outside.",
        "the function compiles (no fallback to eager)",
    )  # fmt: skip


@rule("GB4198", "Attempted to copy.deepcopy a tensor")
def _deepcopy(b: Break) -> Fix:
    return _fix(b, "copy_tensor",
                "Use `t.clone()` (or `t.detach().clone()`) instead of copy.deepcopy on a tensor.",
                REMOVES)  # fmt: skip


def _grad_state(b: Break) -> Fix:
    return _fix(
        b, "requires_grad_in_graph",
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
        return _fix(
            b, "autograd_in_graph",
            "Set torch._dynamo.config.trace_autograd_ops = True so Dynamo traces backward() "
            "into the graph; or call backward() outside the compiled function.",
            "backward() is traced into the graph; the break is gone",
            config={"trace_autograd_ops": True}, code_edit=False,
        )  # fmt: skip
    return _fix(b, "autograd_in_graph",
                "Call backward() outside the compiled function (compile the forward and loss).",
                MOVES_OUT)  # fmt: skip


@rule("GB9186", "using `torch.autograd.grad` with `torch._dynamo.config.trace_autograd_ops=False`")
def _autograd_grad(b: Break) -> Fix:
    return _fix(
        b, "autograd_in_graph",
        "Set torch._dynamo.config.trace_autograd_ops = True so Dynamo traces "
        "torch.autograd.grad into the graph; or call it outside the compiled function.",
        "torch.autograd.grad is traced into the graph; the break is gone",
        config={"trace_autograd_ops": True}, code_edit=False,
    )  # fmt: skip


@rule("GB0363", "An opaque object was created in the middle of the program.")
def _opaque(b: Break) -> Fix:
    if "Generator" in b.code or "Generator" in b.explanation:
        return _generator_rng(b)
    return _fix(
        b, "created_in_graph",
        "Create the object before calling the compiled function and pass it in, or keep it "
        "on the module.",
        REMOVES,
    )  # fmt: skip


@rule("GB7650", "torch.Generator method")
def _generator_rng(b: Break) -> Fix:
    return _fix(
        b, "generator_rng",
        "Dynamo cannot create or use a torch.Generator in compiled code: draw the random "
        "tensor outside (`torch.rand(..., generator=gen)`) and pass it in, or use the global "
        "RNG inside (`torch.rand(...)`, seeded with torch.manual_seed outside).",
        REMOVES,
    )  # fmt: skip


@rule("GB0091", "Read uninitialized cell")
def _cell(b: Break) -> Fix:
    return _fix(
        b, "closure_cell",
        "An inner function reads a variable of the enclosing function before it is assigned "
        "(in eager this raises NameError): assign it before the inner function is called.",
        REMOVES,
    )  # fmt: skip


@rule("GB0273", "Keyword args passed to exception constructor")
def _exception_kwargs(b: Break) -> Fix:
    return _fix(b, "exception",
                "Pass the exception's arguments positionally (`raise MyError(0)`), or set them "
                "as attributes after creating it.", REMOVES)  # fmt: skip


@rule("GB0034", "Data-dependent assertion failed (cannot compile partial graph)")
def _assert(b: Break) -> Fix:
    return _fix(
        b, "assert",
        "Replace the assert on tensor data with torch._assert(cond, msg) (checked at run time "
        "in the graph), or remove it.",
        REMOVES,
    )  # fmt: skip


@rule("GB0119", "Uninitialized nn.Module")
def _uninitialized(b: Break) -> Fix:
    return _fix(b, "module_init",
                "Call super().__init__() first in the module's __init__.", REMOVES)  # fmt: skip


@rule("GB0003", "Attempt to trace generator")
def _generator(b: Break) -> Fix:
    return _fix(
        b, "generator",
        "Don't compile a generator function: compile a plain function that calls it (and "
        "consumes it, e.g. list(gen(x))).",
        REMOVES,
    )  # fmt: skip


# --- torch before 2.8: no GB id, no gb_type, no hints ------------------------------------------

# (pattern over reason + explanation + code, GB id of the rule that answers). First match wins.
LEGACY: list[tuple[re.Pattern[str], str]] = [
    (
        re.compile(
            r"skip function graph_break|torch\._dynamo\.graph_break\(\)|User-inserted graph break"
        ),
        "GB0025",
    ),
    (
        re.compile(r"builtin operator `?print|BuiltinVariable\(print\)|builtin: print|\bprint\("),
        "GB0059",
    ),
    (re.compile(r"logging|Logger|\blog(ger)?\.(info|debug|warning|error)\(", re.I), "GB0291"),
    (re.compile(r"\bwarnings\.warn\(|_warnings"), "GB0007"),
    (
        re.compile(r"[Dd]ata-dependent (branching|jump)|generic_jump|attempted to jump with"),
        "GB0170",
    ),
    (re.compile(r"_local_scalar_dense"), "GB0033"),
    (re.compile(r"Tensor\.item|\.item\(\)|\bitem\b.*scalar|capture_scalar_outputs"), "GB0124"),
    (re.compile(r"tolist"), "GB0109"),
    (re.compile(r"ndarray|\.numpy\(\)|numpy", re.I), "GB0294"),
    (
        re.compile(
            r"dynamic output shape|dynamic shape operator|nonzero|masked_select|unique|capture_dynamic_output",
            re.I,
        ),
        "GB0036",
    ),
    (
        re.compile(r"torch\.compiler\.disable|disabled function|skip_frame|_disable_dynamo"),
        "GB0098",
    ),
    (
        re.compile(
            r"Attempted to call function marked as skipped|skip function|C extension"
            r"|builtin_function_or_method|non-torch function"
        ),
        "GB0007",
    ),  # fmt: skip
    (re.compile(r"[Uu]nsupported (function|method|builtin)|call_function"), "GB0156"),
]


def _legacy(b: Break) -> Fix | None:
    for pattern, gb_id in LEGACY:
        if pattern.search(b.text):
            if gb_id == "GB0294" and "ndarray" in b.text and "ndarray." in b.explanation:
                return _ndarray(b)
            return RULES[gb_id].make(replace(b, gb_id=None))
    return None


# --- the lookup ------------------------------------------------------------------------------


def _norm_id(gb_id: str | None) -> str | None:
    if not gb_id:
        return None
    m = re.fullmatch(r"(?i)gb(\d+)", gb_id.strip())
    return f"GB{m.group(1)}" if m else None


def fix_for(
    gb_id: str | None,
    gb_type: str,
    explanation: str = "",
    hints: Sequence[str] = (),
    code: str = "",
    library_file: str | None = None,
    torch_version: str = "",
) -> Fix:
    """The fix for one break: by GB id, then gb_type, then explanation, then the patterns
    of torch before 2.8; torch's hints where compilediag has no fix of its own.
    `torch_version`: the torch that broke (default: the installed one)."""
    gid = _norm_id(gb_id)
    gb_type = (gb_type or "").strip()
    ids = [gid] if gid else []
    if not ids:
        ids = list(registry_types().get(gb_type, []))
    if not ids:
        ids = ids_for_explanation(explanation)
    b = Break(ids[0] if ids else None, gb_type, explanation or "", tuple(hints), code or "",
              library_file, torch_version)  # fmt: skip
    for i in ids:
        if i in RULES:
            return RULES[i].make(replace(b, gb_id=i))
    if not ids and not hints:
        legacy = _legacy(b)
        if legacy is not None:
            return legacy
    floor = floor_fix(ids[0] if ids else None, hints)
    return floor or GENERIC


def table() -> dict[str, Fix]:
    """Every gb_type of the installed torch's registry -> its fix (compilediag's where it
    has one, else the registry's hints). Placeholder breaks: no code, the registry's texts."""
    out: dict[str, Fix] = {}
    for gb_id, entries in registry().items():
        for e in entries:
            if e.gb_type not in out:
                out[e.gb_type] = fix_for(gb_id, e.gb_type, _fill(e.explanation))
    return out


def config_fixes() -> dict[str, Fix]:
    """compilediag's config-level fixes, one per setting (for a feature that tries them)."""
    samples = {
        "GB0059": ("builtin operator `print` with argument types ['str']", 'print("x")'),
        "GB0291": ("", 'logger.info("x")'),
        "GB0007": ("Dynamo does not know how to trace the Python builtin `_warnings.warn`.",
                   'warnings.warn("x")'),
        "GB0124": ("", "v = t.item()"),
        "GB0036": ("Operator `aten.nonzero.default`'s output shape depends on input Tensor data.",
                   "idx = torch.nonzero(t)"),
        "GB0067": ("Mutating a variable from outside the scope of this HOP is not supported.",
                   "checkpoint(fn, x)"),
        "GB0123": ("Dynamo currently does not support tracing `Tensor.backward()` when "
                   "trace_autograd_ops is off.", "loss.backward()"),
        "GB9186": ("", "torch.autograd.grad(loss, w)"),
    }  # fmt: skip
    out: dict[str, Fix] = {}
    for gb_id, (explanation, code) in samples.items():
        fix = fix_for(gb_id, "", explanation, (), code)
        if fix.config:
            out[gb_id] = fix
    return out
