"""Find the model and its inputs in a user's file.

The parsing of what the user typed (`PATH[:ATTR]`, `--input`, `--shapes`) is pure and
imports no torch: the CLI checks it before a worker starts. Loading the file and building
tensors happens in the worker only. What the file's source says, read without running it,
is `target_source.py`.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compilediag.errors import UsageError, does_not_parse
from compilediag.harness.target_source import MODEL_LOOKUP, exited, looks_like_a_script, run_instead

DTYPES = {
    "float32": "float32", "float": "float32", "fp32": "float32",
    "float16": "float16", "half": "float16", "fp16": "float16",
    "bfloat16": "bfloat16", "bf16": "bfloat16",
    "float64": "float64", "double": "float64",
    "int64": "int64", "long": "int64", "int32": "int32", "int": "int32",
    "int16": "int16", "int8": "int8", "uint8": "uint8", "bool": "bool",
}  # fmt: skip

INPUT_SPEC_HELP = "SHAPE[:DTYPE[:HIGH]], e.g. 8x16, 2x128:int64:30522, 4x3x32x32:bfloat16"

INPUT_LOOKUP = "get_input_sets(), get_inputs(), or --input SHAPE[:DTYPE[:HIGH]]"


@dataclass
class InputSpec:
    """One random tensor the user described on the command line."""

    shape: list[int]
    dtype: str = "float32"
    high: int | None = None  # exclusive upper bound for integer tensors

    def describe(self) -> str:
        text = "x".join(str(d) for d in self.shape) + f":{self.dtype}"
        return text + (f":{self.high}" if self.high is not None else "")


@dataclass
class Target:
    """What the worker loads: a file, an optional attribute, and how to make inputs."""

    path: str
    attr: str | None = None
    inputs: list[InputSpec] = field(default_factory=list)
    shapes: list[list[int]] = field(default_factory=list)
    # serving: the stream's requests (each a shape, or None, per tensor); [] with `stream`
    # set: the model file's get_request_stream()
    requests: list[list[list[int] | None]] = field(default_factory=list)
    stream: bool = False
    serving_max: list[int] = field(default_factory=list)  # --max-shape: the largest request
    serving_mode: str = ""  # --serving-mode; "": the file's SERVING_MODE, else inference_mode


def parse_shape(text: str, what: str) -> list[int]:
    if not re.fullmatch(r"\d+(x\d+)*", text.strip()):
        raise UsageError(
            f"{what} {text!r} is not a shape.",
            hint="Write dimensions joined by 'x', e.g. 8x16 or 2x3x32x32.",
        )
    return [int(d) for d in text.strip().split("x")]


def parse_input_spec(text: str) -> InputSpec:
    parts = text.split(":")
    if len(parts) > 3:
        raise UsageError(f"--input {text!r} has too many ':' parts.", hint=INPUT_SPEC_HELP)
    shape = parse_shape(parts[0], "--input")
    dtype = "float32"
    if len(parts) > 1 and parts[1]:
        if parts[1].lower() not in DTYPES:
            raise UsageError(
                f"--input {text!r}: unknown dtype {parts[1]!r}.",
                hint="Known dtypes: " + ", ".join(sorted(set(DTYPES.values()))) + ".",
            )
        dtype = DTYPES[parts[1].lower()]
    high = None
    if len(parts) > 2:
        if not parts[2].isdigit() or int(parts[2]) < 1:
            raise UsageError(
                f"--input {text!r}: HIGH must be a positive integer, got {parts[2]!r}.",
                hint=INPUT_SPEC_HELP,
            )
        high = int(parts[2])
    return InputSpec(shape=shape, dtype=dtype, high=high)


def parse_shapes(text: str) -> list[list[int]]:
    items = [t for t in text.split(",") if t.strip()]
    if not items:
        raise UsageError("--shapes is empty.", hint="Write shapes like 2x16,4x16,8x16.")
    return [parse_shape(t, "--shapes entry") for t in items]


def split_target(text: str) -> tuple[str, str | None]:
    """`model.py:Net` -> ("model.py", "Net"); a bare path keeps attr None."""
    path, sep, attr = text.rpartition(":")
    if sep and attr.isidentifier() and path:
        return path, attr
    return text, None


def check_target_file(path: str) -> Path:
    p = Path(path)
    if not p.exists():
        raise UsageError(f"model file {path} does not exist.", hint="Check the path.")
    if p.is_dir():
        raise UsageError(f"{path} is a folder, not a model file.", hint="Pass a .py file.")
    if p.suffix != ".py":
        raise UsageError(f"{path} is not a Python file.", hint="Pass a .py file.")
    if not os.access(p, os.R_OK):
        raise UsageError(
            f"model file {path} cannot be read (no permission).", hint="Check its rights."
        )
    try:  # (a file that is no Python never reaches a worker)
        compile(p.read_bytes(), str(p), "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as e:
        raise does_not_parse(path, e.lineno, e.msg, "compilediag imports it as Python") from None
    except ValueError as e:  # (a null byte)
        raise does_not_parse(path, "?", str(e), "compilediag imports it as Python") from None
    return p.resolve()


# what a model's refusal of the inputs it was given says (the error's first line): a dtype
# it does not take (an Embedding's float indices), a count of arguments it does not take
WRONG_DTYPE = re.compile(r"scalar type|dtype|\w+Tensor instead", re.I)
WANTS_INTEGERS = re.compile(r"\b(Long|Int)\b")
# two operands of different dtypes (`mat1 and mat2 must have the same dtype, but got Double
# and Float`): torch's names, as --input spells them
DTYPE_PAIR = re.compile(r"got (\w+) and (\w+)")
TORCH_DTYPES = {"Double": "float64", "Float": "float32", "Half": "float16",
                "BFloat16": "bfloat16", "Long": "int64", "Int": "int32"}  # fmt: skip
WRONG_COUNT = re.compile(
    r"^TypeError: .*(positional argument|required argument|unexpected keyword)"
)


def misfit(target: Target, i: int, served: int | None, described: list[str], said: str) -> str:
    """Call `i`'s inputs, which the user typed or a later input set gave, refused by the
    model (`said`: the error); `served`: the request it is of a stream (0-based). The fix
    named where the error tells what the model wanted: a dtype, the arguments, a shape."""
    what = (
        "--input" if target.inputs and not target.shapes and not target.stream
        else f"--shapes entry {i + 1}" if target.shapes
        else f"request {served + 1}" if served is not None
        else f"input set {i + 1}"
    )  # fmt: skip
    text = f"{what} ({', '.join(described)}) does not fit the model: {said}"
    shape, _, given = (described[0] if described else "2x16").partition(":")
    dtype = "int64" if WANTS_INTEGERS.search(said) else "DTYPE"
    pair = DTYPE_PAIR.search(said)
    named = [TORCH_DTYPES.get(x, "") for x in pair.groups()] if pair else []
    other = [x for x in named if x and x != (given.split(":")[0] or "float32")]
    if what == "--input" and WRONG_DTYPE.search(said) and not WRONG_COUNT.search(said):
        fix = (
            f". Give the dtype the model takes after the shape: `--input {shape}:"
            f"{other[0] if len(other) == 1 else dtype}` (SHAPE[:DTYPE[:HIGH]]; integers are "
            "drawn below HIGH, 10 by default)"
        )
        if len(named) == 2 and all(x.startswith(("float", "bfloat")) for x in named):
            fix += (
                "; where the model makes tensors of the other dtype itself (its states, a "
                "buffer), no --input fits: give get_model() the model in the dtype your "
                "program runs it in (`model.double()`, `model.half()`)"
            )
        return text + fix
    if what == "--input":
        return text + (
            ". --input replaces all of get_inputs(): give one --input for each tensor "
            "argument, in order, with the shape and dtype it takes (an argument that is no "
            "tensor needs get_inputs())"
        )
    if target.shapes and WRONG_DTYPE.search(said):
        return text + (
            ". --shapes takes each tensor's dtype from get_inputs(): give the dtype the model "
            "takes there"
        )
    if target.shapes:
        others = (
            "; the other tensors keep get_inputs()' shapes: to vary them too, give each "
            "call's inputs in get_input_sets()"
            if len(described) > 1 else ""
        )  # fmt: skip
        return text + (
            ". Each --shapes entry is the first tensor input's shape (others of its shape "
            "follow it): give shapes the model takes, as get_inputs()'s first tensor has "
            f"them{others}"
        )
    return text


# --- worker side: everything below imports torch -------------------------------------


def load_module(path: str) -> Any:
    """Import the user's file as a module (its `if __name__ == "__main__"` block stays off)."""
    p = Path(path).resolve()
    sys.path.insert(0, str(p.parent))
    name = "compilediag_user_" + re.sub(r"\W", "_", p.stem)
    spec = importlib.util.spec_from_file_location(name, p)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except SystemExit as e:  # a script that runs at import: it is no model file
        raise exited(path, e) from None
    except Exception as e:  # (a model file's own error stays the model's, said as such)
        if looks_like_a_script(path):
            raise exited(path, e) from None
        raise
    return module


def _build(obj: Any, what: str) -> Any:
    import torch

    if isinstance(obj, torch.nn.Module) or _takes_arguments(obj):
        return obj  # a function that needs arguments is the model itself, not its factory
    if callable(obj):
        try:
            made = obj()
        except TypeError as e:
            if inspect.isclass(obj) and "argument" in str(e):
                raise UsageError(
                    f"{what} needs constructor arguments ({e}).",
                    hint="Add a get_model() function to the file that builds it.",
                ) from None
            raise
        if isinstance(made, torch.nn.Module) or callable(made):
            return made
    raise UsageError(
        f"{what} is not an nn.Module or a function that returns one.",
        hint=f"Point at {MODEL_LOOKUP}.",
    )


def _takes_arguments(obj: Any) -> bool:
    """Whether `obj` is a function (no class) with a positional parameter it has no default
    for: `model = forward` where `def forward(x)` is what to compile (a new user's file read
    "the model failed without torch.compile: model() missing 1 required positional
    argument")."""
    if inspect.isclass(obj) or not callable(obj):
        return False
    try:
        params = inspect.signature(obj).parameters.values()
    except (TypeError, ValueError):  # a builtin with no signature
        return False
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return any(p.kind in positional and p.default is p.empty for p in params)


def find_model(module: Any, attr: str | None, path: str) -> Any:
    import torch

    if attr:
        if not hasattr(module, attr):
            raise UsageError(f"{path} has no attribute {attr!r}.", hint=f"Use {MODEL_LOOKUP}.")
        return _build(getattr(module, attr), f"{path}:{attr}")
    if callable(getattr(module, "get_model", None)):
        made = module.get_model()
        # what get_model() returns is the model: a module, or any callable (a function to
        # compile) - never a factory to call again
        if callable(made) and not inspect.isclass(made):
            return made
        return _build(made, f"{path}: get_model()")
    if hasattr(module, "model"):
        return _build(module.model, f"{path}: `model`")
    classes = [
        c
        for c in vars(module).values()
        if inspect.isclass(c)
        and issubclass(c, torch.nn.Module)
        and c.__module__ == module.__name__
        and _no_arg_constructible(c)
    ]
    if len(classes) == 1:
        return classes[0]()
    if classes:  # ("no model found ... Found 2" read as a contradiction)
        names = ", ".join(c.__name__ for c in classes)
        raise UsageError(
            f"{len(classes)} models in {path}: {names}; which one to run?",
            hint=f"Name one, e.g. {path}:{classes[0].__name__}, or add get_model().",
        )
    raise UsageError(
        f"no model found in {path}.{_needing_arguments(module)}",
        hint=run_instead(path, "add get_model() and get_inputs()")
        or f"Looked for {MODEL_LOOKUP}. Add one, or name what to run with {path}:ATTR.",
    )


def _needing_arguments(module: Any) -> str:
    """` Model(vocab, dim) needs arguments: add get_model() that builds it.` for the file's
    own nn.Module classes that can't be made without arguments; '' where there are none."""
    import torch

    named = []
    for c in vars(module).values():
        if (
            inspect.isclass(c)
            and issubclass(c, torch.nn.Module)
            and c.__module__ == module.__name__
        ):
            try:
                params = inspect.signature(c).parameters.values()
            except (TypeError, ValueError):
                continue
            needed = [q.name for q in params if q.default is q.empty
                      and q.kind not in (q.VAR_POSITIONAL, q.VAR_KEYWORD)]  # fmt: skip
            if needed:
                named.append(f"{c.__name__}({', '.join(needed)})")
    if not named:
        return ""
    return (
        f" {', '.join(named)} need{'s' if len(named) == 1 else ''} constructor arguments: add "
        "`def get_model(): return ...` that builds it with them."
    )


def _no_arg_constructible(cls: type) -> bool:
    try:
        params = list(inspect.signature(cls).parameters.values())
    except (TypeError, ValueError):
        return False
    return all(
        p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params
    )


Call = tuple[tuple, dict]


def _as_call(value: Any, where: str) -> Call:
    import torch

    if isinstance(value, dict):
        return (), dict(value)
    if isinstance(value, (tuple, list)):
        return tuple(value), {}
    if isinstance(value, torch.Tensor):
        return (value,), {}
    raise UsageError(
        f"{where} returned {type(value).__name__}; expected a tuple of positional "
        "arguments, a dict of keyword arguments, or a tensor.",
    )


def make_tensor(spec: InputSpec) -> Any:
    import torch

    dtype = getattr(torch, spec.dtype)
    if dtype.is_floating_point:
        return torch.randn(spec.shape, dtype=dtype)
    if dtype == torch.bool:
        return torch.rand(spec.shape) > 0.5
    return torch.randint(0, spec.high or 10, spec.shape, dtype=dtype)


def find_input_sets(module: Any, target: Target, path: str, sweep: bool) -> Iterator[Call]:
    """Every call the run makes, one at a time: one for explain (--input, else
    get_inputs(), else the first of get_input_sets()), several for a sweep (get_input_sets(),
    or --shapes over get_inputs()).

    A generator, because get_input_sets() may itself be one that changes the model
    between calls (e.g. model.eval() after the first).
    """
    import torch

    sets_fn = getattr(module, "get_input_sets", None)
    has_inputs = callable(getattr(module, "get_inputs", None))
    if target.inputs:
        base: Iterator[Call] = iter([(tuple(make_tensor(s) for s in target.inputs), {})])
    elif callable(sets_fn) and (sweep or not has_inputs) and not (target.shapes and has_inputs):
        base = (_as_call(s, "get_input_sets()") for s in sets_fn())
    elif has_inputs:
        base = iter([_as_call(module.get_inputs(), "get_inputs()")])
    else:
        raise UsageError(
            f"no inputs found for the model in {path}.",
            hint=run_instead(path, "add get_inputs() (or pass --input SHAPE)")
            or f"Add {INPUT_LOOKUP}.",
        )
    first = next(base, None)
    if first is None:
        raise UsageError(f"{path}: get_input_sets() returned nothing.")
    if not target.shapes:
        yield first
        yield from base
        return
    args, kwargs = first
    positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
    if not positions:
        # (a look: get_inputs() gave two keyword tensors, and read "the inputs have none")
        keywords = [k for k, v in kwargs.items() if isinstance(v, torch.Tensor)]
        raise UsageError(
            "--shapes varies the first positional tensor argument (and those of its shape), "
            + (
                f"and the model's tensors are keyword arguments ({', '.join(keywords)})."
                if keywords
                else "and the model's inputs have no tensor."
            ),
            hint="Pass the inputs positionally, or describe them with --input.",
        )
    tensor = args[positions[0]]
    # the tensors of the first one's shape go with it (an attention mask beside input_ids)
    alike = [i for i in positions if args[i].shape == tensor.shape]
    for shape in target.shapes:
        if len(shape) != tensor.dim():
            raise UsageError(
                f"--shapes entry {'x'.join(map(str, shape))} has {len(shape)} dims; "
                f"the first input has {tensor.dim()} ({'x'.join(map(str, tensor.shape))}).",
            )
        new_args = list(args)
        for i in alike:
            new_args[i] = _resized(args[i], shape)
        yield tuple(new_args), kwargs


def _resized(tensor: Any, shape: list[int]) -> Any:
    """A tensor of `shape` like `tensor`: its dtype, its one value where it holds one (a
    mask of ones stays ones), else values drawn in its range (integers below its largest)."""
    import torch

    if tensor.numel() and bool((tensor == tensor.flatten()[0]).all()):
        return torch.full(shape, tensor.flatten()[0].item(), dtype=tensor.dtype)
    spec = InputSpec(shape=shape, dtype=str(tensor.dtype).removeprefix("torch."))
    if not tensor.dtype.is_floating_point and tensor.dtype != torch.bool and tensor.numel():
        spec.high = int(tensor.max().item()) + 1
    return make_tensor(spec)


def describe_value(value: Any) -> str:
    import torch

    if isinstance(value, torch.Tensor):
        shape = "x".join(str(d) for d in value.shape) or "scalar"
        grad = ":requires_grad" if value.requires_grad else ""  # torch guards on it too
        return f"{shape}:{str(value.dtype).removeprefix('torch.')}{grad}"
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(describe_value(v) for v in value) + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={describe_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, str):  # a mode Dynamo guards on: its value tells two calls apart
        return f"str={value!r}" if len(value) <= STR_SHOWN else f"str={value[:STR_SHOWN]!r}…"
    return type(value).__name__ + (f"={value!r}" if isinstance(value, (int, float, bool)) else "")


STR_SHOWN = 24  # a str argument's characters shown in a call's description


def describe_call(call: Call) -> list[str]:
    args, kwargs = call
    return [describe_value(a) for a in args] + [
        f"{k}={describe_value(v)}" for k, v in kwargs.items()
    ]
