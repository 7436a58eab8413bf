"""The frameworks a graph break can be inside (DDP, FSDP, torch, logging, contextlib,
transformers): code the user calls but does not own, each with the advice that fits it, and
which of them a break's library frames are in."""

from __future__ import annotations

from compilediag.paths import Owner, installed_package, library_path, owner_of

# Code the user calls but does not own: a break inside it is theirs to avoid, not to fix
# inside. Matched on the path from the package down; the advice fits the framework.
DDP = "torch.nn.parallel (DDP)"
FSDP, FSDP_CODE = "torch.distributed.fsdp (FSDP)", "torch/distributed/fsdp/"
FRAMEWORKS: list[tuple[str, str, str]] = [
    (
        "torch/nn/parallel/",
        DDP,
        "Dynamo broke inside DistributedDataParallel's own code. Compile the module, then "
        "wrap it (`DDP(torch.compile(model))`), or compile each block; torch's DDP notes "
        "describe how DDP and torch.compile work together.",
    ),
    (
        FSDP_CODE,
        FSDP,
        "FSDP keeps its hooks (each block's all-gather and reshard) out of compiled code on "
        "purpose (torch._dynamo.config.skip_fsdp_hooks), so a compiled root breaks at every "
        "block it shards. Compile each block inside the sharding instead, in torchtitan's "
        "order: `fully_shard(block)` then `block.compile()` for each block, then "
        "`fully_shard(model)`; each block is then compiled between FSDP's hooks, and the root's "
        "loop runs in eager mode by design.",
    ),
    (
        "torch/",
        "torch",
        "The break is inside torch itself, under your call: check the call's arguments, or "
        "keep that call outside the compiled function.",
    ),
    (
        "logging/",
        "logging",
        "Dynamo does not trace the logging module: move the call out of forward, guard it "
        "with `if not torch.compiler.is_compiling():`, or add the logger method to "
        "torch._dynamo.config.ignore_logging_functions.",
    ),
    (
        "contextlib.py",
        "contextlib",
        "A context manager Dynamo cannot trace: move the `with` block out of forward, or use "
        "one Dynamo supports (torch.no_grad, torch.autocast, ...).",
    ),
    (
        "transformers/",
        "transformers",
        "The break is inside transformers' own code: look for a config option that avoids "
        "that path (e.g. attn_implementation, use_cache, output_attentions), or compile the "
        "inner model rather than its wrapper.",
    ),
]


# frameworks whose own code the user calls but must not edit: their advice wins over a fix
# that edits the line torch broke on (for DDP, always: the fix is how the model is wrapped)
ALWAYS_FRAMEWORK_ADVICE = {DDP, FSDP}


def framework_of(*files: str) -> tuple[str, str] | None:
    """The framework of a break's library frames, outermost first: DDP's wherever its
    wrapper stands (a contextlib frame inside DDP's forward is DDP's), else the framework of
    the innermost frame that is in one (a break in transformers' generate() is transformers',
    though torch's Module.__call__ and no_grad wrap it)."""
    paths = [f.replace("\\", "/") for f in files]
    for marker, name, advice in FRAMEWORKS:
        if name in ALWAYS_FRAMEWORK_ADVICE and any(_under(marker, p) for p in paths):
            return name, advice
    if (
        paths
        and owner_of(paths[-1]) == Owner.PYTHON
        and not any(_under(marker, paths[-1]) for marker, _, _ in FRAMEWORKS)
    ):
        return None  # Python's own library under the user's call (copy.deepcopy): fixed there
    for path in reversed(paths):
        for marker, name, advice in FRAMEWORKS:
            if _under(marker, path):
                return name, advice
        if installed_package(path):
            return None  # an installed library of no framework's (torchvision): its own
    return None


def _under(marker: str, path: str) -> bool:
    """`path` is under the folders `marker` names, each a whole folder name
    (lightning/pytorch/loops/ is not under torch/), from its package down where it is an
    installed library's or Python's (a venv at /opt/torch/.venv put every library under
    torch/: a look read a break in transformers as "inside torch itself")."""
    lib = library_path(path)
    if lib is not None:
        return lib.startswith(marker)
    return path.startswith(marker) or "/" + marker in path
