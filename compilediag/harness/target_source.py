"""What a model file's source says, read with `ast` without running it: whether a model
class or a function that returns one is built with its defaults, whether the file is a
script (a `__main__` block that trains or runs), and the `compilediag run` command to
suggest instead. Imports no torch; `target.py` loads and runs the file."""

from __future__ import annotations

import ast
import os
import shlex
import traceback
from collections.abc import Iterator
from pathlib import Path

from compilediag.errors import UsageError
from compilediag.paths import user_frame

MODEL_LOOKUP = (
    "a get_model() function, a module attribute `model`, or exactly one nn.Module "
    "subclass that can be built without arguments"
)


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


def exited(path: str, e: BaseException) -> UsageError:
    """A file that ended the process as it was imported, or a script (target_source's
    looks_like_a_script) that raised: a training script run in compilediag's worker, whose
    argument parser read compilediag's own command line (a look read "the model failed
    without torch.compile: SystemExit: 2 ... This is a bug in the model or its inputs"), or
    whose configurator opened it (look 28, nanoGPT: "IsADirectoryError: ... Is a directory:
    '/tmp/compilediag-...'", "a bug in the model")."""
    file, line, code = user_frame(e, path)
    at = f" at {Path(file).name}:{line} `{code}`" if file else ""
    frames = traceback.extract_tb(e.__traceback__)
    parsed = any(Path(f.filename).name == "argparse.py" for f in frames)
    name = Path(path).name
    if not isinstance(e, SystemExit):
        return UsageError(
            f"{name} raised as compilediag imported it ({type(e).__name__}: {e}{at}): it is a "
            "script that runs when imported, here in compilediag's worker, with its command "
            "line and folder, not yours.",
            hint=_run_it(name),
        )
    why = "its argument parser read compilediag's own command line" if parsed else "it exits"
    return UsageError(
        f"{name} exited as compilediag imported it (SystemExit: {e.code}{at}): it is a "
        f"script that runs when imported, and {why}.",
        hint=_run_it(name),
    )


def _run_it(name: str) -> str:
    return (
        f"Run it as you do, under `compilediag run -- python {name} ...`, or point at a file "
        f"that defines the model ({MODEL_LOOKUP}) and runs nothing when imported."
    )
