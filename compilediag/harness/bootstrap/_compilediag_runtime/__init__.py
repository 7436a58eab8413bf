"""compilediag's runtime probe: what a job's compiled code did as it ran, which no trace
holds. Loaded into each process of a `compilediag run` job once it imports torch._dynamo
(sitecustomize.py), and by `compilediag.capture()` in the caller's own process.

It wraps each graph Dynamo compiles, as the backend hands it back, and counts its calls.
A step is the job's step: an optimizer step once the job has made one (from the end of one
optimizer.step() to the end of the next; the first optimizer stepped is the step's), else a
call of the first compiled entry the process calls (the module or function torch.compile
returned), counted whether it ran compiled code or, past the recompile limit, eagerly;
where the entry can't be seen (a module compiled before capture() began on a torch whose
wrapper is not known), a call of the first compiled frame's graphs.

With a profiling window (steps A to B) it splits each step into parts that add up to it:
each forward graph, the eager Python between two graphs of one compiled call (a graph
break's code, the next frame's guards), the backward (each compiled backward graph, the
eager backward between them, the rest of backward), the optimizer step, the data loader's
next batch, and what remains. A step during which torch compiled is left out of the
window's figures (named instead); in steps of a compiled entry, whether each ran under
grad mode and in training mode is counted; the steps just outside the window are timed at
their starts only (one clock reading a step), which measures what the window's own timing
costs. On CUDA each mark is a CUDA event on the current stream, read once after the window:
the parts are then where the GPU's time went (work the CPU did while the GPU was busy
costs none).

At exit (or SIGTERM) it writes one JSON file per process into COMPILEDIAG_RUNTIME_DIR,
in the shape of compilediag.harness.worker_types.ProcessRuntime. Standard library only.
"""

from .hooks import install
from .probe import Probe, parse_window
from .writer import (
    DIR_ENV,
    KERNELS_ENV,
    LOSSES_ENV,
    PROFILE_OUT_ENV,
    STEPS_ENV,
    STOP_ENV,
    install_from_env,
    write,
)

__all__ = [
    "DIR_ENV", "KERNELS_ENV", "LOSSES_ENV", "PROFILE_OUT_ENV", "STEPS_ENV", "STOP_ENV", "Probe", "install",
    "install_from_env", "parse_window", "write",
]  # fmt: skip
