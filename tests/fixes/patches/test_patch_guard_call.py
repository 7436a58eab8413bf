"""`guard_call` (fixes/patches/guard_call.py): a print, a log call or a warning run in
eager mode only; refused where skipping it under compile would skip more than output."""

from __future__ import annotations

from compilediag.fixes.patches import NoPatch, Patch, propose

LOG = """\
import logging

import torch

log = logging.getLogger(__name__)


def forward(x):
    # what the input was
    log.info("x %s", x.shape)  # debugging
    return x + 1
"""
LOG_GUARDED = """\
import logging

import torch

log = logging.getLogger(__name__)


def forward(x):
    # what the input was
    if not torch.compiler.is_compiling():
        log.info("x %s", x.shape)  # debugging
    return x + 1
"""


def test_a_log_call_is_guarded_with_its_comments_kept() -> None:
    p = propose(LOG, 10, "logging")
    assert isinstance(p, Patch) and p.text == LOG_GUARDED
    assert p.what == (
        "the log call runs in eager mode only (guarded by torch.compiler.is_compiling())"
    )


def test_a_warning_and_a_print_are_guarded_alike() -> None:
    source = "import warnings\n\nimport torch\n\n\ndef forward(x):\n    {}\n    return x\n"
    for call, cause in (('warnings.warn("slow")', "warning"), ('print("x", x.dim())', "print")):
        p = propose(source.format(call), 7, cause)
        assert isinstance(p, Patch), p
        assert f"    if not torch.compiler.is_compiling():\n        {call}\n" in p.text


def test_the_called_name_is_read_as_written_never_through_a_call() -> None:
    # `make_logger().info` is no logging call: making the logger may have effects of its
    # own (why the families read names with their own `dotted`, not libcst's
    # get_full_name_for_node, which reads it as `make_logger.info`)
    source = "import torch\n\n\ndef forward(x):\n    make_logger().info('x')\n    return x\n"
    p = propose(source, 5, "logging")
    assert isinstance(p, NoPatch)
    assert p.why == "the line calls `make_logger().info`, not a logging call"


def test_an_argument_with_an_effect_is_refused() -> None:
    source = "import torch\n\n\ndef forward(x, seen):\n    print('n', seen.pop())\n    return x\n"
    p = propose(source, 5, "print")
    assert isinstance(p, NoPatch)
    assert p.why == "an argument calls `seen.pop`, whose effect the guard would skip under compile"
    walrus = "import torch\n\n\ndef forward(x):\n    print((n := x.dim()))\n    return x\n"
    p = propose(walrus, 5, "print")
    assert (
        isinstance(p, NoPatch) and p.why == "an argument assigns (:=), which the guard would skip"
    )


def test_a_file_without_import_torch_is_refused() -> None:
    p = propose("def forward(x):\n    print(x)\n    return x\n", 2, "print")
    assert isinstance(p, NoPatch)
    assert p.why == "the file has no `import torch` for the rewrite to use"
