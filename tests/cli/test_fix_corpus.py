"""`compilediag fix` on the repository's break corpus (#41): each break classified here, as
data, by whether its cause is code-level (an edit of the user's own file removes it and
keeps the outputs), with the reason; the share of code-level breaks that get a verified
patch is computed and must reach 70%. Every kept patch is then checked against torch's
own answer in this process: `torch._dynamo.explain` on the patched file counts fewer
breaks, a CompileCounter fewer graphs, and the outputs equal the original's."""

from __future__ import annotations

import importlib.util
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from compilediag.cli.commands.common import make_spec
from compilediag.cli.commands.fix import find_fixes, sha256
from compilediag.cli.config import Config
from compilediag.cli.options import RunOptions
from compilediag.fixes.patches import FixResult
from tests.conftest import ROOT, SAMPLES

# the whole suite's (`pytest --full`): end-to-end runs, minutes on 2 cores (docs/tests.md)
pytestmark = pytest.mark.full

BREAKS = SAMPLES / "breaks"

# (file, line) -> (code-level?, why). Code-level: a source edit in the user's file can
# remove the break while keeping the outputs. The rest: a deliberate break, a cause
# outside the user's code (a torch op, a library), or one whose value is the point.
CORPUS: dict[tuple[str, int], tuple[bool, str]] = {
    ("breaks/b01_print.py", 18): (True, "a debug print: skipped under compile"),
    ("breaks/b02_print_shape.py", 13): (True, "a debug print of a shape"),
    ("breaks/b03_logger_info.py", 22): (True, "a log call: skipped under compile"),
    ("breaks/b04_warnings_warn.py", 15): (True, "a warning: skipped under compile"),
    ("breaks/b05_graph_break.py", 12): (False, "an explicit graph_break(): the user asked for it"),
    ("breaks/b06_dynamo_disable.py", 23): (False, "a helper the user marked disable on purpose"),
    ("breaks/b07_item_value.py", 12): (True, ".item() used as a value: a 0-d tensor does"),
    ("breaks/b08_item_branch.py", 13): (True, "an if on .item() choosing tensors: torch.where"),
    ("breaks/b09_data_branch.py", 12): (True, "an if on a tensor choosing tensors: torch.where"),
    ("breaks/b10_nonzero.py", 12): (True, "nonzero only counted: count_nonzero"),
    ("breaks/b11_lstsq_dynamic.py", 13): (False, "torch.linalg.lstsq has no meta kernel: torch's op"),
    ("breaks/b12_lstsq_no_meta.py", 16): (False, "torch.linalg.lstsq has no meta kernel: torch's op"),
    ("breaks/b13_tolist_float.py", 12): (True, "tolist() read element-wise: keep the tensor"),
    ("breaks/b14_tolist_int.py", 13): (True, "tolist() summed: keep the tensor"),
    ("breaks/b15_torch_equal.py", 12): (True, "torch.equal in an if choosing tensors"),
    ("breaks/b16_numpy_lexsort.py", 13): (True, "np.lexsort on a tensor: a stable argsort"),
    ("breaks/b17_ndarray_method.py", 12): (True, "len(tobytes()) is numel * element_size"),
    ("breaks/b18_custom_op_no_fake.py", 16): (True, "the user's custom op needs a fake kernel"),
    ("breaks/b19_fake_kernel_raises.py", 22): (True, "the user's fake kernel raises"),
    ("breaks/b20_time_time.py", 14): (False, "the host clock's value is used: no graph twin"),
    ("breaks/b21_unittest_skip.py", 14): (True, "a call whose result is unused: removable"),
    ("breaks/b22_manual_seed.py", 12): (False, "reseeding the global RNG each call is the point"),
    ("breaks/b23_lock_context.py", 16): (False, "a lock's effect is the program's intent"),
    ("breaks/b24_redirect_stdout.py", 14): (False, "redirecting output is the program's intent"),
    ("breaks/b25_checkpoint_side_effect.py", 16): (True, "a list appended in a checkpointed fn"),
    ("breaks/b26_sorted_tensors.py", 12): (True, "sorted() of 0-d tensors: torch.sort"),
    ("breaks/b27_zip_input.py", 13): (True, "the caller passes a zip: a list would do"),
    ("breaks/b28_class_in_forward.py", 13): (True, "a class made per call: define it once"),
    ("breaks/b29_return_bound_method.py", 17): (False, "the output itself is a bound method"),
    ("breaks/b30_deepcopy_tensor.py", 14): (True, "deepcopy of a tensor: clone"),
    ("breaks/b31_str_tensor.py", 12): (False, "the text of the values is used"),
    ("breaks/b32_exec.py", 13): (False, "exec of code text: no static twin"),
    ("breaks/b33_storage_data_ptr.py", 12): (False, "memory addresses compared: no graph twin"),
    ("breaks/b34_requires_grad_creation.py", 12): (False, "autograd state is the output's"),
    ("breaks/b35_backward.py", 19): (False, "backward inside forward: autograd semantics"),
    ("breaks/b36_autograd_grad.py", 19): (False, "autograd.grad inside forward"),
    ("breaks/b37_setattr_requires_grad.py", 13): (False, "autograd state is the output's"),
    ("breaks/b38_skipfile_inline.py", 19): (True, "a call whose result is unused: removable"),
    ("breaks/b39_uninitialized_cell.py", 17): (True, "a try that always fails: dead code"),
    ("breaks/b40_torch_generator.py", 12): (False, "a fresh RNG object per call: its stream"),
    ("breaks/b41_ndarray_astype_object.py", 12): (False, "the output is an object ndarray"),
    ("breaks/b42_step_unsupported.py", 13): (False, "a debugging break the user asked for"),
    ("breaks/b43_break_in_context_manager.py", 22): (False, "an explicit graph_break()"),
    ("breaks/b44_break_in_loop.py", 13): (False, "an explicit graph_break()"),
    ("breaks/b45_requires_grad_leak.py", 13): (False, "autograd state is the output's"),
    ("breaks/b46_gru.py", 21): (False, "torch's GRU: a setting (allow_rnn), not an edit"),
    ("breaks/b47_sparse_input.py", 20): (False, "the input's layout: the caller's to_dense()"),
    ("item_break.py", 15): (True, ".item() used as a value"),
    ("data_branch.py", 15): (True, "an if on a tensor choosing tensors"),
    ("print_break.py", 17): (True, "a debug print"),
    ("logging_break.py", 18): (True, "a log call"),
    ("numpy_break.py", 16): (True, "np.lexsort on a tensor"),
    ("nonzero_break.py", 15): (True, "nonzero only counted"),
    ("graph_breaks.py", 22): (True, "a debug print"),
    ("graph_breaks.py", 24): (True, "an if on a tensor choosing tensors"),
    ("graph_breaks.py", 26): (True, ".item() used as a value"),
    ("costly_break.py", 31): (False, "a post-processing step marked disable on purpose"),
    ("costly_break.py", 33): (False, "an explicit graph_break()"),
}  # fmt: skip

CODE_LEVEL = sorted({f for (f, _), (code, _) in CORPUS.items() if code})


def test_every_break_sample_is_classified() -> None:
    files = {str(p.relative_to(SAMPLES)) for p in BREAKS.glob("b*.py")}
    assert files <= {f for f, _ in CORPUS}
    for (f, line), (_, why) in CORPUS.items():
        assert (SAMPLES / f).is_file() and why
        # the docstring names the break's line
        assert f"line {line}" in (SAMPLES / f).read_text() or f.startswith("graph_breaks")


def fix_file(name: str) -> FixResult:
    path = SAMPLES / name
    run = RunOptions(target=str(path), backend="eager", timeout=300)
    spec = make_spec(run, Config(), "eager", timings=False)
    source = path.read_text()
    return find_fixes(spec, path, source, sha256(source), 300)


@pytest.fixture(scope="module")
def corpus() -> dict[str, FixResult]:
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(CODE_LEVEL, pool.map(fix_file, CODE_LEVEL), strict=True))


def load(path: Path, name: str):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


def torch_counts(module, torch):  # type: ignore[no-untyped-def]
    """torch's own answer: explain's graph and break counts, a CompileCounter's graphs,
    and the eager output, all on the module's model and inputs under seed 0."""
    from torch._dynamo.testing import CompileCounter

    torch.manual_seed(0)
    model = module.get_model()
    inputs = module.get_inputs()
    with torch.no_grad():
        eager = model(*inputs)
        torch._dynamo.reset()
        explained = torch._dynamo.explain(model)(*inputs)
        torch._dynamo.reset()
        counter = CompileCounter()
        compiled = torch.compile(model, backend=counter)(*inputs)
    torch._dynamo.reset()
    return explained.graph_break_count, counter.frame_count, eager, compiled


def test_corpus_share_and_torch_agrees(corpus: dict[str, FixResult], tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    patched, missed = [], []
    for (f, line), (code, _) in CORPUS.items():
        if not code:
            continue
        found = [b for b in corpus[f].breaks if b.line == line]
        if found and found[0].patched:
            patched.append((f, line))
        else:
            missed.append((f, line, found[0].why if found else "not reported"))
    share = len(patched) / (len(patched) + len(missed))
    print(f"verified patches: {len(patched)} of {len(patched) + len(missed)} ({share:.0%})")
    for m in missed:
        print("  no patch:", *m)
    assert share >= 0.70, missed
    # every file with a kept patch: torch's own explain and CompileCounter on it agree
    for i, f in enumerate(sorted({f for f, _ in patched})):
        original = load(SAMPLES / f, f"orig_{i}")
        new = tmp_path / str(i) / Path(f).name
        new.parent.mkdir()
        new.write_text(corpus[f].text)
        fixed = load(new, f"fixed_{i}")
        breaks0, graphs0, eager0, compiled0 = torch_counts(original, torch)
        breaks1, graphs1, eager1, compiled1 = torch_counts(fixed, torch)
        kept = sum(b.patched for b in corpus[f].breaks)
        assert breaks1 == breaks0 - kept, f
        assert graphs1 < graphs0, f
        for a, b in ((eager0, eager1), (compiled0, compiled1), (eager0, compiled1)):
            a = a if isinstance(a, tuple) else (a,)
            b = b if isinstance(b, tuple) else (b,)
            for x, y in zip(a, b, strict=True):
                torch.testing.assert_close(y, x, rtol=1e-5, atol=1e-6)


def test_no_patch_changes_outputs(corpus: dict[str, FixResult]) -> None:
    """Every kept patch's evidence says the outputs were equal, and the evidence's counts
    go down."""
    for result in corpus.values():
        for b in result.breaks:
            if b.patched:
                assert b.evidence is not None
                assert b.evidence.graph_breaks[1] < b.evidence.graph_breaks[0]
                assert b.evidence.eager_err <= 1e-4 and b.evidence.compiled_err <= 1e-4
                assert b.diff.startswith("--- a/")


ROOT = ROOT  # the tests' root, for a reader of this file
