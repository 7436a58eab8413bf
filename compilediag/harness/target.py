"""Find the model and its inputs in a user's file.

The parsing of what the user typed (`PATH[:ATTR]`, `--input`, `--shapes`) is pure and
imports no torch: the CLI checks it before a worker starts. Loading the file and building
tensors happens in the worker only.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import os
import re
import shlex
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compilediag.errors import UsageError

DTYPES = {
    "float32": "float32", "float": "float32", "fp32": "float32",
    "float16": "float16", "half": "float16", "fp16": "float16",
    "bfloat16": "bfloat16", "bf16": "bfloat16",
    "float64": "float64", "double": "float64",
    "int64": "int64", "long": "int64", "int32": "int32", "int": "int32",
    "int16": "int16", "int8": "int8", "uint8": "uint8", "bool": "bool",
}  # fmt: skip

INPUT_SPEC_HELP = "SHAPE[:DTYPE[:HIGH]], e.g. 8x16, 2x128:int64:30522, 4x3x32x32:bfloat16"

MODEL_LOOKUP = (
    "a get_model() function, a module attribute `model`, or exactly one nn.Module "
    "subclass that can be built without arguments"
)
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


def _parse_shape(text: str, what: str) -> list[int]:
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
    shape = _parse_shape(parts[0], "--input")
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
    return [_parse_shape(t, "--shapes entry") for t in items]


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
    return p.resolve()


# --- what a model file's source says, read without running it ----------------------------


def _parse(path: str) -> ast.Module | None:
    try:
        return ast.parse(Path(path).read_text(errors="replace"), filename=path)
    except (OSError, SyntaxError, ValueError):
        return None


def _is_main(node: ast.stmt) -> bool:
    """`if __name__ == "__main__":`"""
    if not isinstance(node, ast.If):
        return False
    test = ast.unparse(node.test)
    return "__name__" in test and "__main__" in test


def _top_level(body: list[ast.stmt], main: bool = True) -> Iterator[ast.stmt]:
    """A module's (or a function's) statements: the top level and the blocks under it
    (if, for, with, try), not the bodies of functions and classes. `main`: with the
    `if __name__ == "__main__":` block, which runs when the file is run, not imported."""
    for node in body:
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if not main and _is_main(node):
            continue
        for name in ("body", "orelse", "finalbody"):
            yield from _top_level(getattr(node, name, []), main)
        for handler in getattr(node, "handlers", []):
            yield from _top_level(handler.body, main)


def _dotted(node: ast.expr) -> str:
    """`torch.optim.SGD` for that expression; "" for anything but names and attributes."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    return ""


def _bound_names(tree: ast.Module) -> set[str]:
    """The names the module binds when imported ("*" for a star import: any name)."""
    names: set[str] = set()
    for node in _top_level(tree.body, main=False):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def _model_classes(tree: ast.Module) -> dict[str, ast.ClassDef]:
    """The file's own nn.Module subclasses: a base named `...Module`, or another of them."""
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    found: dict[str, ast.ClassDef] = {}
    grew = True
    while grew:
        grew = False
        for name, node in classes.items():
            bases = [_dotted(b) for b in node.bases]
            if name not in found and any(b.endswith("Module") or b in found for b in bases):
                found[name] = node
                grew = True
    return found


def _returns_a_model(fn: ast.FunctionDef | ast.AsyncFunctionDef, models: set[str]) -> bool:
    """Whether a function plainly returns a model: its return annotation names one, or it
    returns a call of one of the file's model classes or of `nn.*` (directly, or through
    a name it bound to such a call)."""

    def is_model(expr: ast.expr | None) -> bool:
        parts = (_dotted(expr) if expr is not None else "").split(".")
        if parts[-1] in models or parts[-1] == "Module":
            return True
        # a layer of torch.nn (`nn.Sequential(...)`), not one of its functions
        return "nn" in parts[:-1] and not {"functional", "init", "utils"} & set(parts)

    if is_model(fn.returns):
        return True
    own = list(_top_level(fn.body))  # (not the functions it defines)
    made = {
        t.id
        for node in own
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
        and is_model(node.value.func)
        for t in node.targets
        if isinstance(t, ast.Name)
    }  # fmt: skip
    for node in own:
        if not isinstance(node, ast.Return):
            continue
        if isinstance(node.value, ast.Call) and is_model(node.value.func):
            return True
        if isinstance(node.value, ast.Name) and node.value.id in made:
            return True
    return False


def built_with_defaults(path: str, attr: str | None, built: str) -> tuple[str, str, int] | None:
    """When the model was found by the last resort of the lookup - the file's one
    nn.Module class, built with its constructor's defaults - what to tell the user: the
    message, its fix, and the class's line; None when the file chose its model (a
    get_model() or `model`, or ATTR on the command line) or there was nothing to choose
    (a constructor without parameters, and no function that returns a model).

    `built`: the class the worker built, by name. The file is read, not run (a star
    import may bind anything: then nothing is said); the functions that return a model
    are those whose source plainly does (`_returns_a_model`): they are named, not called."""
    tree = None if attr else _parse(path)
    if tree is None:
        return None
    bound = _bound_names(tree)
    if {"get_model", "model", "*"} & bound:
        return None
    models = _model_classes(tree)
    cls = models.get(built)
    if cls is None:
        return None
    init = next(
        (n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None
    )
    params = bool(
        init
        and (
            len(init.args.posonlyargs) + len(init.args.args) > 1
            or init.args.kwonlyargs or init.args.vararg or init.args.kwarg
        )
    )  # fmt: skip
    factories = [
        n.name
        for n in tree.body
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        and _returns_a_model(n, set(models))
    ]
    if not params and not factories:
        return None
    name = Path(path).name
    message = f"compilediag built {built}(){' with its defaults' if params else ''}: "
    message += f"{name} has no get_model()"
    if factories:
        listed = ", ".join(f"{f}()" for f in factories)
        message += f", and {listed} {'returns' if len(factories) == 1 else 'return'} a model"
        fix = f"pass {name}:{factories[0]} to use {factories[0]}(), or define get_model()."
    else:
        fix = f"define get_model() to choose the model (e.g. return {built}(...))."
    return message + ".", fix, cls.lineno


def looks_like_a_script(path: str) -> bool:
    """A file that runs something itself - a training script rather than a model file: it
    has an `if __name__ == "__main__":` block, or its top level calls torch.compile, an
    optimizer (torch.optim) or .backward()."""
    tree = _parse(path)
    if tree is None:
        return False
    for node in _top_level(tree.body):
        if _is_main(node):
            return True
        calls = [
            _dotted(c.func)
            for c in ast.walk(node)
            if isinstance(c, ast.Call)
            and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        ]
        if any(
            c == "torch.compile" or ".optim." in f".{c}." or c.endswith(".backward") for c in calls
        ):
            return True
    return False


def run_instead(path: str, otherwise: str) -> str:
    """For a file that looks like a script: the advice to run it as it is (`otherwise`:
    what a model file would add instead); "" for any other file."""
    if not looks_like_a_script(path):
        return ""
    try:
        shown = os.path.relpath(path)
    except ValueError:
        shown = path
    if shown.startswith(".."):
        shown = path
    return (
        f"{Path(path).name} looks like a script: run it as it is with "
        f"`compilediag run -- python {shlex.quote(shown)}`, or {otherwise}."
    )


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
    spec.loader.exec_module(module)
    return module


def _build(obj: Any, what: str) -> Any:
    import torch

    if isinstance(obj, torch.nn.Module):
        return obj
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
    found = f" Found {len(classes)}: " + ", ".join(c.__name__ for c in classes) if classes else ""
    raise UsageError(
        f"no model found in {path}.{found}",
        hint=run_instead(path, "add get_model() and get_inputs()")
        or f"Looked for {MODEL_LOOKUP}. Name one with {path}:ATTR.",
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
        raise UsageError(
            "--shapes varies the first tensor argument, but the model's inputs have none.",
            hint="Pass the inputs positionally, or describe them with --input.",
        )
    tensor = args[positions[0]]
    for shape in target.shapes:
        if len(shape) != tensor.dim():
            raise UsageError(
                f"--shapes entry {'x'.join(map(str, shape))} has {len(shape)} dims; "
                f"the first input has {tensor.dim()} ({'x'.join(map(str, tensor.shape))}).",
            )
        spec = InputSpec(shape=shape, dtype=str(tensor.dtype).removeprefix("torch."))
        if not tensor.dtype.is_floating_point and tensor.numel():
            spec.high = int(tensor.max().item()) + 1
        new_args = list(args)
        new_args[positions[0]] = make_tensor(spec)
        yield tuple(new_args), kwargs


def describe_value(value: Any) -> str:
    import torch

    if isinstance(value, torch.Tensor):
        shape = "x".join(str(d) for d in value.shape) or "scalar"
        return f"{shape}:{str(value.dtype).removeprefix('torch.')}"
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(describe_value(v) for v in value) + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={describe_value(v)}" for k, v in value.items()) + "}"
    return type(value).__name__ + (f"={value!r}" if isinstance(value, (int, float, bool)) else "")


def describe_call(call: Call) -> list[str]:
    args, kwargs = call
    return [describe_value(a) for a in args] + [
        f"{k}={describe_value(v)}" for k, v in kwargs.items()
    ]
