"""A recompile of a library's frame (transformers, a framework's training loop): what the
user can do from their side, since the values that change are the library's own or the
batches its loop passes (a collator's padding)."""

from __future__ import annotations

from compilediag.analysis.callers import CalledBy, drop_last_code
from compilediag.analysis.history import Entry
from compilediag.analysis.recompiles.guard_words import UNNAMED, Guard, guard_head
from compilediag.paths import Owner, possessive
from compilediag.report.vocabulary import RecompileCause
from compilediag.trace.formats import GUARD_LOWER_BOUND, GUARD_RANGE, GUARD_SIZE


def inner_library_frame(e: Entry) -> str:
    """The installed package whose code this frame is, when the user did not call it (the
    library called its own code, or a framework's loop called it: its inputs are values the
    library or the loop made); '' for the user's code, or a library frame the user called
    (an nn.Sequential's forward, a transformers model called with `model(**batch)`, by the
    user's line or by compilediag's worker: they take the user's tensors). Whose call it
    is comes from the whole stack, decided once (`Entry.caller`)."""
    package = e.code.package if e.code.owner == Owner.LIBRARY else ""
    if not package or e.caller.by not in (CalledBy.LIBRARY, CalledBy.FRAMEWORK):
        return ""
    return package


def under_training_loop(e: Entry) -> bool:
    """A framework's training loop (the Trainer, accelerate, Lightning, or an installed
    package that runs the user's model) is on the frame's stack."""
    return bool(e.caller.loop)


def guard_dim(g: Guard) -> str:
    """The dim a size guard is about ('0', '1', ...), '' for another guard."""
    for pattern in (GUARD_SIZE, GUARD_RANGE, GUARD_LOWER_BOUND):
        if m := pattern.match(g.guard):
            return m["i"]
    return ""


def size_advice(g: Guard, dynamic: bool, loop: str = "") -> str:
    """Sizes that change from call to call in the batches a framework's training loop
    passes, which the user doesn't pass by hand: a sequence dim is a collator's padding
    (each batch padded to its longest sequence); the batch dim is the loader's (a smaller
    last batch is `loaders_last_batch`'s, before this)."""
    if guard_dim(g) == "0":
        made = (
            "It is the batch size of the batches the training loop passes: it changes from "
            "step to step (a sampler, or a loader that makes batches of several sizes)."
        )
        fix = (
            f"give every batch one size (`{drop_last_code(loop)}` where only the last batch "
            "is smaller), or compile with dynamic=True"
        )
    else:
        made = (
            "It is a size of the batches the training loop passes: a collator padding each "
            "batch to its longest sequence changes it from batch to batch."
        )
        fix = (
            'pad every batch to one length (the collator\'s `padding="max_length", '
            "max_length=N`; `pad_to_multiple_of=8` keeps the lengths few), or compile with "
            "dynamic=True"
        )
    now = (
        "torch made it dynamic on this recompile (automatic dynamic), so later sizes reuse "
        "this graph: one more compile in all. To skip that one too: "
        if dynamic
        else "Each new size compiles again until it is dynamic: "
    )
    setting = (
        " (under the Trainer or accelerate: ACCELERATE_DYNAMO_USE_DYNAMIC=1)"
        if loop in ("", "the Trainer", "accelerate")
        else ""
    )
    return f"{made} {now}{fix}{setting}."


def library_recompile_advice(package: str, g: Guard, e: Entry, dynamic: bool = False) -> str:
    """A recompile of a library's frame that the library itself called: what the user can
    do from their side. Generation advice only where generate() is on the stack; sizes
    that change under a framework's training loop are the batches' own (a collator's
    padding)."""
    own, subject = possessive(package), guard_subject(g)
    head = f"This frame is {own} own code, called from inside {package}: "
    generating = any("generate" in f.name for f in e.compile.stack)
    if g.cause in (RecompileCause.SHAPE, RecompileCause.BOUNDED) and under_training_loop(e):
        return size_advice(g, dynamic, e.caller.loop)
    if (
        package == "transformers"
        and g.cause in (RecompileCause.SHAPE, RecompileCause.BOUNDED)
        and generating
    ):
        return (
            head + f"{subject} grows with the generated sequence. For shapes that stay the same "
            "from token to token (what Inductor's CUDA graphs need), give generate() a static "
            'KV cache (`generate(..., cache_implementation="static")`, or '
            '`model.generation_config.cache_implementation = "static"`), keep max_new_tokens '
            "the same between calls, and compile the model's forward rather than generate(). "
            "Or compile with dynamic=True, so the length is dynamic from the first compile."
        )
    if g.cause in (RecompileCause.SHAPE, RecompileCause.FLOAT, RecompileCause.INT):
        return (
            head + f"{subject} is a value of {own}, not one you pass, so it can't be "
            "marked. Compile with dynamic=True (sizes start dynamic), or let torch make it "
            "dynamic on this recompile (automatic dynamic: one more compile of this frame)."
        )
    if g.cause == RecompileCause.OBJECT:
        return (
            head + f"{package} passes it a new object each time, so each call compiles "
            "again until the recompile limit, then runs in eager mode. Compile the module "
            f"{package} runs (the model's forward) rather than the {package} call around it, or "
            f"leave that call uncompiled (`torch.compiler.disable`)."
        )
    return (
        head + f"{g.words}. These are values {package} passes itself, so each kind of call "
        "gets its own graph (one compile each). Nothing in your code changes it; it costs "
        "compile time, and past the recompile limit the frame runs in eager mode. To avoid "
        f"it, leave the {package} call uncompiled (`torch.compiler.disable`)."
    )


def guard_subject(g: Guard) -> str:
    """What the failed guard is about, as the words name it: `boxes` of `boxes dim 0 ...`."""
    head = guard_head(g.words)
    return head if head == UNNAMED else f"`{head}`"
