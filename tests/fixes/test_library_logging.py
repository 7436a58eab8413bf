"""A break on a library's logging call, the user's own model file around it: transformers'
GPT-2 (made from a config, nothing downloaded) given labels logs through `warning_once`, a
method transformers adds to logging.Logger, and Dynamo breaks there. The advice names that
method in the setting this torch honours, from the user's side, and torch's own count with
the setting applied has no break left (the framework's generic words named options that
have nothing to do with it)."""

from __future__ import annotations

import logging

import pytest

from compilediag.fixes.calls import LOGGER_REORDERED
from compilediag.report.vocabulary import BreakCause
from compilediag.trace.releases import release
from tests.fixes.test_fix_interplay import torch_breaks

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def gpt2() -> torch.nn.Module:
    config = transformers.GPT2Config(
        n_layer=1, n_embd=32, n_head=2, vocab_size=100, n_positions=32,
        bos_token_id=0, eos_token_id=0,
    )  # fmt: skip
    return transformers.GPT2LMHeadModel(config)


def test_a_librarys_logger_method_is_named_in_the_setting_that_removes_the_break() -> None:
    from compilediag.testing import compile_report

    ids = torch.randint(0, 100, (2, 8))
    report = compile_report(gpt2(), {"input_ids": ids, "labels": ids})
    (b,) = report.graph_breaks
    assert b.cause is BreakCause.LOGGING and b.library == "transformers", b
    assert b.library_frame is not None and "warning_once(" in b.library_frame.code, b
    setting = (
        "reorderable_logging_functions"
        if release(torch.__version__) >= LOGGER_REORDERED  # type: ignore[operator]
        else "ignore_logging_functions"
    )
    said = f"torch._dynamo.config.{setting}.add(logging.Logger.warning_once)"
    assert said in b.suggestion and "attn_implementation" not in b.suggestion, b.suggestion
    assert "is_compiling" not in b.suggestion, b.suggestion  # a guard edits their line
    assert torch_breaks(gpt2(), {}, input_ids=ids, labels=ids)
    fixed = {setting: {logging.Logger.warning_once}}
    assert torch_breaks(gpt2(), fixed, input_ids=ids, labels=ids) == []
