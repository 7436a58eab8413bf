"""Whose a frame is (the user's, a library's, Python's, compilediag's: judged once, on the
real path), and how paths are shown to the user (no torch, no rich: every layer may use
it).

An installed library's file is shown from its package down (`torchvision/ops/boxes.py`)
wherever its venv is, inside the project folder too; the user's files relative to the folder
the command ran in. Never a machine path for a library."""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import traceback
from collections.abc import Iterable
from enum import StrEnum

LIBRARY_ROOTS = ("/site-packages/", "/dist-packages/")
# Python's own library folder, on any machine (`/usr/lib/python3.11/`, a pyenv's)
STDLIB_ROOT = re.compile(r"/lib/python3\.\d+/")
# an absolute path up to its site-packages folder or Python's library folder, inside free text
_LIBRARY_PREFIX = re.compile(
    r"(?<![\w.-])/[^\s'\"`()]*?/(?:(?:site|dist)-packages|lib/python3\.\d+)/(?!(?:site|dist)-packages/)"
)


# --- whose a frame is -------------------------------------------------------------------

# compilediag's own folder, as imported and with its links resolved: the worker may import
# it through another path than the CLI (a symlinked checkout), and its frames are never the
# user's
_OWN_DIRS = tuple(
    dict.fromkeys(
        os.path.dirname(p).replace("\\", "/") + "/"
        for p in (os.path.abspath(__file__), os.path.realpath(__file__))
    )
)
_STDLIB = os.path.dirname(os.__file__).replace("\\", "/") + "/"


@functools.lru_cache(maxsize=8192)
def in_torch(filename: str) -> bool:
    """A file of torch's: its package down from a `/torch/` folder that holds what torch's
    own package folder holds (`nn/`, `_dynamo/`: a source checkout's too), not any folder
    named torch (a venv at /opt/torch/.venv, a project at ~/torch/job/ are not torch's)."""
    f = filename.replace("\\", "/")
    lib = library_path(f)
    if lib is not None:
        return lib.startswith("torch/")
    parts = f.split("/torch/")[1:]
    return any(tail.split("/", 1)[0] in _torch_entries() for tail in parts)


@functools.cache
def _torch_entries() -> frozenset[str]:
    """The names in torch's package folder (this machine's torch), or torch's usual ones."""
    folder = _torch_folder()
    names = set(os.listdir(folder)) if folder and os.path.isdir(folder) else set()
    return frozenset(names | {"_dynamo", "_inductor", "nn", "fx", "utils", "_functorch",
                              "autograd", "distributed", "_higher_order_ops", "__init__.py"})  # fmt: skip


@functools.lru_cache(maxsize=1024)
def is_own_file(filename: str) -> bool:
    """A file of compilediag's (the worker that calls the model), through links too, and in
    a trace recorded by another checkout or install of it: a path whose part after its last
    `compilediag/` names a file of this package (`.../compilediag/harness/worker.py`)."""
    f = filename.replace("\\", "/")
    if f.startswith(_OWN_DIRS) or os.path.realpath(f).replace("\\", "/").startswith(_OWN_DIRS):
        return True
    _, sep, tail = f.rpartition("/compilediag/")
    if not sep or not tail.endswith(".py"):
        return False
    return tail in FORMER_MODULES or os.path.isfile(os.path.join(_OWN_DIRS[0], tail))


# the modules that call the user's code, where they stood before harness/ held them: a trace
# an older release recorded names them so
FORMER_MODULES = frozenset(
    ("worker.py", "worker_torch.py", "runner.py", "measure.py", "spawn.py", "launch.py",
     "target.py")
)  # fmt: skip


@functools.lru_cache(maxsize=8192)
def is_library_file(filename: str) -> bool:
    """A frame the user did not write: torch, site-packages, the stdlib, frozen modules,
    and compilediag itself, judged on the path as torch wrote it (absolute) and with its
    links resolved. `<string>` (code given to `python -c`) is the user's."""
    f = filename.replace("\\", "/")
    if f.startswith("<") and f != "<string>":
        return True
    real = os.path.realpath(f).replace("\\", "/") if f.startswith("/") else f
    if any(m in p for m in LIBRARY_ROOTS for p in (f, real)) or is_own_file(f):
        return True
    if in_torch(f) or in_torch(real):  # torch from a source checkout too
        return True
    return f.startswith(_STDLIB) or bool(STDLIB_ROOT.search(f))


class Owner(StrEnum):
    """Whose code a file is."""

    USER = "user"
    LIBRARY = "library"  # an installed package other than torch
    TORCH = "torch"
    PYTHON = "python"  # Python's own library, frozen modules
    COMPILEDIAG = "compilediag"


def owner_of(filename: str) -> Owner:
    if not is_library_file(filename):
        return Owner.USER
    if is_own_file(filename):
        return Owner.COMPILEDIAG
    package = package_of(filename.replace("\\", "/"))
    if package == "torch" or (not package and in_torch(filename)):
        return Owner.TORCH
    return Owner.LIBRARY if installed_package(filename) else Owner.PYTHON


# --- how a path is shown ----------------------------------------------------------------


def library_path(path: str) -> str | None:
    """`/venv/lib/python3.11/site-packages/torchvision/ops/boxes.py` ->
    `torchvision/ops/boxes.py`, `/usr/lib/python3.11/copy.py` -> `copy.py`; None for a file
    that is neither an installed library's nor Python's own."""
    for marker in LIBRARY_ROOTS:
        if marker in path:
            return path.split(marker, 1)[1]
    m = STDLIB_ROOT.search(path)
    return path[m.end() :] if m else None


def package_of(path: str) -> str:
    """The package a library file belongs to (`torchvision`, `logging`; `copy` for a
    module), '' for a file that is not a library's."""
    lib = library_path(path.replace("\\", "/"))
    if not lib:
        return ""
    head = lib.split("/", 1)[0]
    return head[:-3] if head.endswith(".py") else head


def installed_package(file: str) -> str:
    """The installed library (site-packages) a file is in, '' for any other: a break in
    Python's own library under the user's call (copy.deepcopy) is fixed at that call."""
    path = file.replace("\\", "/")
    return package_of(path) if any(root in path for root in LIBRARY_ROOTS) else ""


def possessive(package: str) -> str:
    """`torchvision's`, `transformers'`."""
    return f"{package}'" if package.endswith("s") else f"{package}'s"


def short_path(path: str) -> str:
    """A path relative to the current folder when it lies beneath it; a library file from
    its package down."""
    if not path or path.startswith("<"):
        return path
    lib = library_path(path)
    if lib is not None:
        return lib
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def user_base(paths: Iterable[str]) -> str:
    """The folder that holds every user file among `paths` (absolute, not an installed
    library's or Python's): what the HTML report shows them relative to. '' when there is
    none, or only `/` holds them all."""
    dirs = [os.path.dirname(p) for p in paths if p.startswith("/") and library_path(p) is None]
    try:
        base = os.path.commonpath(dirs) if dirs else ""
    except ValueError:
        return ""
    return "" if base == "/" else base


def portable_path(path: str, root: str) -> str:
    """How a saved report stores a path: an installed library's file from its package down
    (first: a venv may lie inside `root`), Python's own from its library folder, else
    relative to `root` (the folder the command ran in) when it lies beneath it, else as it
    is - so a library's file never names the machine, and a report made on a CI runner
    reads the same anywhere."""
    if not path or path.startswith("<"):
        return path
    lib = library_path(path)
    if lib is not None:
        return lib
    prefix = root.rstrip("/") + "/"
    if path.startswith(prefix):
        return path[len(prefix) :]
    return path


def portable_text(text: str, root: str) -> str:
    """The same for paths inside free text (notes, errors)."""
    return _LIBRARY_PREFIX.sub("", text).replace(root.rstrip("/") + "/", "")


def where(file: str, line: int) -> str:
    return f"{short_path(file)}:{line}"


@functools.cache
def _torch_folder() -> str:
    spec = importlib.util.find_spec("torch")  # (found, not imported)
    return os.path.dirname(spec.origin) if spec is not None and spec.origin else ""


def torch_source(shown: str) -> str:
    """A path as torch's guard comments show its own files (from its package folder:
    `nn/modules/conv.py`) as the file of this machine's torch; '' where it is none."""
    folder = _torch_folder()
    path = os.path.join(folder, shown) if folder and shown else ""
    return path if path and os.path.isfile(path) else ""


def resolve_file(shown: str, near: str) -> str:
    """A path as torch's guard comments show it (cut from the left: `mp/job/train.py`, a
    library's from its package: `transformers/models/bert/modeling_bert.py`) as a file on
    this machine, found beside `near` (a file of the same run); '' where none is found."""
    if not shown:
        return ""
    if near.endswith(shown):
        return near
    for marker in LIBRARY_ROOTS:
        if marker in near:
            candidate = near.split(marker, 1)[0] + marker + shown
            if os.path.isfile(candidate):
                return candidate
    return ""


def user_frame(exc: BaseException, path: str) -> tuple[str, int, str]:
    """The innermost frame of the user's own code in an exception's traceback: the line
    that raised, in the model's file or a helper of theirs beside it (a vendored module),
    else the model file's innermost frame."""
    frames = traceback.extract_tb(exc.__traceback__)
    target = os.path.realpath(path)
    mine = [f for f in frames if not is_library_file(f.filename)]
    mine = mine or [f for f in frames if os.path.realpath(f.filename) == target]
    if isinstance(exc, SyntaxError) and exc.filename:
        return exc.filename, exc.lineno or 0, (exc.text or "").strip()
    if not mine:
        return "", 0, ""
    f = mine[-1]
    return f.filename, f.lineno or 0, (f.line or "").strip()
