"""What the probe reads of torch's own state: the compile under way, the frames Dynamo has
compiled, CUDA graphs' counters; of the machine's, its load; and the process's terminal,
where it says its progress, and its output quieted while torch's profiler speaks. Standard
library only (torch is looked up in sys.modules)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any


def _compile_id() -> tuple[str, int | None]:
    """The compile under way, as the trace writes it (`0/1`, `!2/0/1`), and its frame."""
    from torch._guards import CompileContext

    cid = CompileContext.current_compile_id()
    if cid is None or cid.frame_id is None:
        return "?", None
    text = f"{cid.frame_id}/{cid.frame_compile_id}"
    ca = getattr(cid, "compiled_autograd_id", None)
    return (f"!{ca}/{text}" if ca is not None else text), cid.frame_id


_frames: Any = None  # torch._dynamo.utils.counters["frames"], once torch has it


def _frames_compiled() -> int:
    """Frames Dynamo has tried to compile so far in this process (torch's own counter)."""
    global _frames
    if _frames is None:
        utils = sys.modules.get("torch._dynamo.utils")
        if utils is None:
            return 0
        _frames = utils.counters["frames"]
    return int(_frames.get("total", 0))


def _cudagraph_counts() -> tuple[int, int]:
    """CUDA graphs under mode="reduce-overhead": how many graphs ran without one (torch's
    own counter), and how many were recorded again (its tree managers' counts, where this
    torch keeps them)."""
    utils = sys.modules.get("torch._dynamo.utils")
    skips = int(utils.counters["inductor"].get("cudagraph_skips", 0)) if utils else 0
    rerecords = 0
    trees = sys.modules.get("torch._inductor.cudagraph_trees")
    try:
        containers = getattr(getattr(trees, "local", None), "tree_manager_containers", {})
        for container in containers.values():
            manager = getattr(container, "tree_manager", None)
            for per_function in getattr(manager, "num_rerecord", {}).values():
                rerecords += sum(per_function.values())
    except Exception:  # another torch's layout: the count stays what was found
        pass
    return skips, rerecords


def _user_site() -> tuple[str, int]:
    """The innermost frame outside torch and this probe: where the user called
    torch.compile."""
    torch = sys.modules.get("torch")
    paths = (getattr(torch, "__file__", None), __file__)
    skip = tuple(os.path.dirname(p) + os.sep for p in paths if p)
    frame: Any = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(skip):
        frame = frame.f_back
    return (frame.f_code.co_filename, frame.f_lineno) if frame is not None else ("", 0)


def _holds(module: Any, ids: set[int]) -> bool:
    """`module` is one of `ids` or holds one (its compiled wrapper, its DDP: the same model)."""
    modules = getattr(module, "modules", None)
    return bool(ids) and modules is not None and any(id(m) in ids for m in modules())


def _evaluating(module: Any) -> bool:
    """A call made under no_grad or inference_mode, or of a module in eval mode."""
    torch = sys.modules.get("torch")
    if torch is not None and (not torch.is_grad_enabled() or torch.is_inference_mode_enabled()):
        return True
    return module is not None and getattr(module, "training", True) is False


def job_frames() -> list[Any]:
    """The frames under way in the calling thread, innermost first, torch's and the
    probe's left out: the job's own (its loop, its functions, its libraries')."""
    skip = own_dirs()
    out = []
    frame: Any = sys._getframe(1)
    while frame is not None:
        if not frame.f_code.co_filename.startswith(skip):
            out.append(frame)
        frame = frame.f_back
    return out


def own_dirs() -> tuple[str, ...]:
    """The folders of torch's code and the probe's: no code of the job's."""
    torch = sys.modules.get("torch")
    return tuple(
        os.path.dirname(p) + os.sep for p in (getattr(torch, "__file__", None), __file__) if p
    )


def distributed(ranks: int = 1) -> bool:
    """The process has a process group now, of `ranks` ranks at least."""
    dist = sys.modules.get("torch.distributed")
    try:
        return (
            dist is not None and dist.is_available() and dist.is_initialized()
            and dist.get_world_size() >= ranks
        )  # fmt: skip
    except Exception:  # noqa: BLE001 - a torch.distributed half set up or torn down
        return False


def load() -> list[float]:
    """[the load average over the last minute (runnable processes, the job's own among
    them), the cores this process may use, torch's intra-op threads (0: not read), the
    OMP_NUM_THREADS the job's environment set (0: none)]; [] where the system keeps none."""
    torch = sys.modules.get("torch")
    try:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        threads = torch.get_num_threads() if torch is not None else 0
        setting = os.environ.get("OMP_NUM_THREADS", "")
        chosen = float(setting) if setting.strip().isdigit() else 0.0
        return [round(os.getloadavg()[0], 2), float(cores or 0), float(threads), chosen]
    except (OSError, AttributeError):
        return []


def say(text: str) -> None:
    """A progress line on the job's terminal (its stderr a TTY; never when piped), from
    the lowest rank only."""
    if os.environ.get("RANK", "0") != "0":
        return
    try:
        if sys.stderr.isatty():
            sys.stderr.write(f"compilediag: {text}\n")
            sys.stderr.flush()
    except (AttributeError, ValueError, OSError):  # a stream replaced or closed by the job
        pass


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """The job's stdout and stderr, at the file descriptors, sent nowhere while torch's
    profiler starts or stops: its C++ side prints `USDT: ... profiler_start` lines there,
    which are compilediag's noise in the job's own output (a few milliseconds; the job's
    Python streams are flushed first, and are its own again after)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, ValueError, OSError):
            pass
    saved: list[tuple[int, int]] = []
    try:
        null = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        yield
        return
    try:
        for fd in (1, 2):
            try:
                saved.append((fd, os.dup(fd)))
                os.dup2(null, fd)
            except OSError:
                continue
        yield
    finally:
        for fd, copy in saved:
            os.dup2(copy, fd)
            os.close(copy)
        os.close(null)
