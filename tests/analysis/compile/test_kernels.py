"""Kernels from Inductor's output code: unit tests on recorded traces, and the real
dump-kernels command end to end (Inductor C++ codegen on CPU; CUDA where present)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from compilediag.analysis.compile.kernel_origins import ops_from_name
from compilediag.analysis.compile.kernels import collect_kernels
from compilediag.analysis.history import build_history
from compilediag.trace.parse import parse_path
from tests.conftest import SAMPLES, fixture_trace, run_cli, run_json, trace_sets

# the whole suite's (`pytest --full`): end-to-end runs, minutes on 2 cores (docs/tests.md)
pytestmark = pytest.mark.full

DEFINITION = re.compile(r"^\w+ = async_compile\.\w+\(", re.M)


def test_ops_from_name_splits_on_known_op_names() -> None:
    known = {"native_layer_norm", "add", "view", "gelu"}
    assert ops_from_name("cpp_fused_add_native_layer_norm_view_1", known) == [
        "aten.add",
        "aten.native_layer_norm",
        "aten.view",
    ]
    assert ops_from_name("triton_poi_fused_gelu_view_2", known) == ["aten.gelu", "aten.view"]
    assert ops_from_name("extern_kernels.mm", known) == []
    # words of an op the graph does not name stay one op, not one op per word
    assert ops_from_name("cpp_fused_max_pool2d_with_indices_0", set()) == [
        "aten.max_pool2d_with_indices"
    ]
    assert ops_from_name("cpp_fused_div_linalg_vector_norm_3", {"div"}) == [
        "aten.div",
        "aten.linalg_vector_norm",
    ]
    # an op the graph does not name, then its backward: two ops, each one torch has
    split = ops_from_name("cpp_fused_mse_loss_mse_loss_backward_1", {"sum"})
    assert split == ["aten.mse_loss", "aten.mse_loss_backward"]
    torch = pytest.importorskip("torch")
    assert all(hasattr(torch.ops.aten, op.removeprefix("aten.")) for op in split)
    assert ops_from_name("cpp_fused_0", known) == []  # the name holds no op
    # ATen's split first; another namespace's op only where ATen has none
    assert ops_from_name("cpp_fused_mul_relu_0", set()) == ["aten.mul", "aten.relu"]
    assert ops_from_name("cpp_fused_all_reduce_mul_0", set()) == [
        "_c10d_functional.all_reduce",
        "aten.mul",
    ]
    assert ops_from_name("cpp_fused__log_softmax_nll_loss_forward_7", set()) == [
        "aten._log_softmax",
        "aten.nll_loss_forward",
    ]


@pytest.mark.parametrize("folder", trace_sets("transformer_block.inductor"), ids=lambda p: p.name)
def test_transformer_block_kernels_match_the_wrapper(folder: Path) -> None:
    path = fixture_trace("transformer_block.inductor", folder)
    graphs = collect_kernels(build_history(parse_path(path)))
    (g,) = graphs
    defined = DEFINITION.findall(g.wrapper)
    generated = [k for k in g.kernels if k.kernel.kind != "extern"]
    assert len(generated) == len(defined) > 0
    block = (SAMPLES / "transformer_block.py").read_text().splitlines()
    forward = range(next(i for i, s in enumerate(block, 1) if "def forward" in s), len(block) + 1)
    for ks in generated:
        k = ks.kernel
        assert ks.source.strip() and k.lines == ks.source.count("\n")
        assert k.ops, k.name
        # every fused op is named in the kernel's name, as Inductor names kernels
        assert all(op.removeprefix("aten.") in k.name for op in k.ops), (k.name, k.ops)
        version = tuple(int(x) for x in folder.name.split("-")[1].split(".")[:2])
        if "cuda" in folder.name or version >= (2, 8):
            # (C++ kernels carry their user lines from Inductor's provenance, 2.8 on)
            assert k.source_lines, k.name
        for place in k.source_lines:
            file, line = place.rsplit(":", 1)
            assert file.endswith("transformer_block.py") and int(line) in forward
    externs = [k.kernel for k in g.kernels if k.kernel.kind == "extern"]
    assert any("addmm" in k.name or "mm" in k.name for k in externs), "matmuls are library calls"


def test_triton_kernel_ops_come_from_inductors_comments() -> None:
    folders = [f for f in trace_sets() if "cuda" in f.name]
    if not folders:
        pytest.skip("no CUDA recording")
    path = fixture_trace("transformer_block.inductor", folders[0])
    (g,) = collect_kernels(build_history(parse_path(path)))
    for ks in g.kernels:
        if ks.kernel.kind == "extern":
            continue
        # the comment block right above the kernel's definition names its ATen ops
        at = g.wrapper.index(f"{ks.kernel.name} = async_compile")
        comment = g.wrapper[:at].rsplit("Original ATen: [", 1)[1].split("]", 1)[0]
        assert ks.kernel.ops == [o.strip() for o in comment.split(",")]
        assert ks.kernel.kind in ("pointwise", "reduction", "persistent_reduction", "template")

        assert not ks.kernel.ops_by_name  # Inductor's own list, said as it is


def test_a_kernels_ops_read_from_its_name_are_said_to_be(tmp_path: Path) -> None:
    """A recorded CPU compile (torch 2.13): Inductor's code names no ops for its C++
    kernels, so their ops come from their names, which can leave one out (#76, the
    fourteenth look: `cpp_fused_gt_silu_sum_1` multiplied by a dynamic `alpha` too). Each
    such kernel says so, and the table says it once, under the header."""
    from compilediag.analysis.build import build_report
    from compilediag.harness.worker_types import WorkerResult
    from compilediag.render import render
    from compilediag.report.model import TargetInfo

    path = fixture_trace("clean_mlp.inductor")
    (g,) = [x for x in collect_kernels(build_history(parse_path(path))) if x.kernels]
    cpp = [ks.kernel for ks in g.kernels if ks.kernel.name.startswith("cpp_")]
    assert cpp
    for k in cpp:  # torch's own record: no "Original ATen" comment where it is called
        call = g.wrapper.index(f"{k.name}(")
        before = g.wrapper[:call].rsplit("\n", 2)[-2]
        assert "Original ATen" not in before and k.ops_by_name, (k.name, before)
    report = build_report(parse_path(path), WorkerResult(), TargetInfo(path="x.py"))
    text = render(report, "table", width=100)
    assert text.count("ops by each kernel's name where Inductor's code names none") == 1, text


@pytest.mark.slow
def test_dump_kernels_writes_one_file_per_generated_kernel(tmp_path: Path) -> None:
    out = tmp_path / "kernels"
    proc = run_cli(
        "dump-kernels", "sample_models/transformer_block.py", "--out", str(out), "--device", "cpu"
    )
    assert proc.returncode == 0, proc.stderr
    index = json.loads((out / "index.json").read_text())
    (wrapper,) = out.glob("*_wrapper.py")
    defined = DEFINITION.findall(wrapper.read_text())
    files = sorted(p.name for p in out.glob("*.cpp"))
    assert len(files) == len(defined) > 0
    generated = [k for k in index["kernels"] if k["kind"] != "extern"]
    assert sorted(k["file"] for k in generated) == files
    for k in generated:
        src = (out / k["file"]).read_text()
        assert 'extern "C"' in src and "kernel(" in src, "the real C++ source"
    assert any(k["kind"] == "extern" for k in index["kernels"])
    md = (out / "index.md").read_text()
    assert all(f in md for f in files)
    assert "generated kernels" in proc.stdout


def test_dump_kernels_refuses_bad_out_before_running(tmp_path: Path) -> None:
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine")
    proc = run_cli("dump-kernels", "sample_models/clean_mlp.py", "--out", str(busy))
    assert proc.returncode == 2 and "not empty" in proc.stderr
    assert [p.name for p in busy.iterdir()] == ["keep.txt"]
    afile = tmp_path / "afile"
    afile.write_text("x")
    proc = run_cli("dump-kernels", "sample_models/clean_mlp.py", "--out", str(afile))
    assert proc.returncode == 2 and "is a file" in proc.stderr
    proc = run_cli("dump-kernels", "sample_models/clean_mlp.py", "--out", "/proc/compilediag-test")
    assert proc.returncode == 2 and "cannot be written" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_explain_shows_kernel_count() -> None:
    from tests.cli.test_explain_e2e import clean_run
    from tests.conftest import shared_json

    report, proc = shared_json(*clean_run("transformer_block.py"))
    assert proc.returncode == 0, proc.stderr
    gen = [k for k in report["kernels"] if k["kind"] != "extern"]
    assert report["summary"]["kernels"] == len(gen) > 0
    # torch's own counter, read in the worker: 0 on an FX-graph cache hit, else at least
    # one kernel object per distinct kernel
    n = report["summary"]["torch_kernel_count"]
    assert n == 0 or n >= len(gen)
    # the worker knows the model: each library matmul names its Linear with the class
    from torch import nn

    from tests.conftest import load_sample

    model, _ = load_sample("transformer_block.py")
    linears = sorted(f"{n} (Linear)" for n, m in model.named_modules() if isinstance(m, nn.Linear))
    mms = [k for k in report["kernels"] if k["ops"] in (["aten.addmm"], ["aten.mm"])]
    assert sorted(m for k in mms for m in k["modules"]) == linears


@pytest.mark.gpu
def test_dump_triton_kernels_on_cuda(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    out = tmp_path / "kernels"
    proc = run_cli(
        "dump-kernels", "sample_models/transformer_block.py", "--out", str(out), "--device", "cuda"
    )
    assert proc.returncode == 0, proc.stderr
    files = list(out.glob("*triton*.py"))
    assert files and all("@triton.jit" in f.read_text() for f in files)


@pytest.mark.slow
def test_caches_are_left_on_kernels_survive_a_hit_and_cold_is_private(tmp_path: Path) -> None:
    """The user's FX-graph cache is used as it is: the second run hits it and still lists
    every kernel (torch logs the generated code on a hit); --cold compiles with private,
    empty caches and leaves the user's untouched."""
    cache = tmp_path / "user-cache"
    env = {"TORCHINDUCTOR_CACHE_DIR": str(cache)}
    args = ("explain", "sample_models/clean_mlp.py", "--no-timings", "--device", "cpu")
    first, _ = run_json(*args, env=env, timeout=600)
    second, _ = run_json(*args, env=env, timeout=600)
    assert first["compile_time"]["caches"].get("fx_graph_cache_miss") == 1
    assert second["compile_time"]["caches"].get("fx_graph_cache_hit") == 1
    names = lambda r: sorted(k["name"] for k in r["kernels"])  # noqa: E731
    assert names(second) == names(first) and first["summary"]["kernels"] > 0
    before = sorted(p.relative_to(cache) for p in cache.rglob("*"))
    cold, _ = run_json(*args, "--cold", env=env, timeout=600)
    assert cold["environment"]["cold"] is True
    assert cold["compile_time"]["caches"].get("fx_graph_cache_miss") == 1
    assert names(cold) == names(first)
    assert sorted(p.relative_to(cache) for p in cache.rglob("*")) == before


@pytest.mark.parametrize("folder", trace_sets("transformer_block.inductor"), ids=lambda p: p.name)
def test_library_calls_fuse_nothing(folder: Path) -> None:
    """An extern call is the one op it names, not the node group Inductor's comment lists."""
    graphs = collect_kernels(
        build_history(parse_path(fixture_trace("transformer_block.inductor", folder)))
    )
    externs = [ks.kernel for g in graphs for ks in g.kernels if ks.kernel.kind == "extern"]
    assert externs
    for k in externs:
        (op,) = k.ops
        assert k.name.removesuffix(".default").endswith(op.removeprefix("aten."))


def _torch_module_paths(sample: str) -> tuple[dict[str, str], str, object]:
    """Compile a sample in this process (a backend that keeps the Dynamo graph) and give
    torch's own answer: node -> the innermost module of its nn_module_stack, as a path;
    the graph's code as the trace prints it; the model."""
    torch = pytest.importorskip("torch")
    from tests.conftest import load_sample

    model, sets = load_sample(sample)
    kept = {}

    def backend(gm, inputs):
        kept["gm"] = gm
        return gm.forward

    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(model, backend=backend)(*sets[0])
    gm = kept["gm"]
    paths = {}
    for n in gm.graph.nodes:
        stack = n.meta.get("nn_module_stack")
        if stack and n.op.startswith("call_"):
            where = list(stack.values())[-1][0]  # "L['self'].body[0]", innermost last
            where = re.sub(r"^L\['\w+'\]", "", where)
            paths[n.name] = re.sub(r"\[(\d+)\]", r".\1", where).lstrip(".")
    return paths, gm.print_readable(print_output=False), model


@pytest.mark.parametrize("sample", ["transformer_block.py", "clean_mlp.py", "costly_break.py"])
def test_kernel_modules_are_the_modules_torch_records(sample: str) -> None:
    """node_modules reads a node's submodule from the names the Dynamo graph gives its
    parameters; torch's own answer is the node's nn_module_stack. Every node whose module
    has parameters is found, and at torch's module."""
    from compilediag.analysis.compile.kernel_origins import node_modules

    torch_paths, code, model = _torch_module_paths(sample)
    ours = node_modules(code)
    with_params = {
        node: path for node, path in torch_paths.items()
        if any(True for _ in model.get_submodule(path).parameters(recurse=False))
    }  # fmt: skip
    assert with_params, "the sample has layers with parameters"
    assert ours == with_params


@pytest.mark.parametrize("folder", trace_sets("transformer_block.inductor"), ids=lambda p: p.name)
def test_each_library_call_names_the_linear_it_computes(folder: Path) -> None:
    """From the recorded trace alone (2.6 to 2.13, CPU and CUDA): each matrix multiply
    Inductor left to a library is one nn.Linear of the block, each Linear once."""
    from torch import nn

    from tests.conftest import load_sample

    model, _ = load_sample("transformer_block.py")
    linears = sorted(n for n, m in model.named_modules() if isinstance(m, nn.Linear))
    logs = parse_path(fixture_trace("transformer_block.inductor", folder))
    kernels = [k.kernel for g in collect_kernels(build_history(logs)) for k in g.kernels]
    mms = [k for k in kernels if k.kind == "extern" and k.ops[0] in ("aten.addmm", "aten.mm")]
    assert sorted(m for k in mms for m in k.modules) == linears
    assert all(len(k.modules) == 1 for k in mms)
    # the attention call is the line that calls it, not the views of qkv folded into it
    (sdpa,) = [k for k in kernels if "scaled_dot_product" in k.name]
    block = (SAMPLES / "transformer_block.py").read_text().splitlines()
    (line,) = [i for i, s in enumerate(block, 1) if "scaled_dot_product_attention(" in s]
    assert [p.rsplit(":", 1)[1] for p in sdpa.source_lines] == [str(line)]
    assert sdpa.modules == []


CONV_MODEL = """
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)

    def forward(self, x):
        return torch.relu(self.conv(x)).mean((2, 3))


def get_inputs():
    return (torch.randn(2, 3, 16, 16),)
"""


@pytest.mark.slow
def test_a_kernel_that_only_moves_data_is_not_called_its_ops(tmp_path: Path) -> None:
    """On CPU Inductor transposes a convolution's input and weight in a kernel it names
    `cpp_fused_convolution_0`; the convolution itself is the library call. The report says
    what the kernel's body does (it computes nothing), not what its name says."""
    model = tmp_path / "conv.py"
    model.write_text(CONV_MODEL)
    report, proc = run_json("explain", str(model), "--no-timings", "--device", "cpu")
    assert proc.returncode == 0, proc.stderr
    kinds = {k["name"]: k["kind"] for k in report["kernels"]}
    assert kinds.get("extern_kernels.convolution") == "extern"
    named = [n for n in kinds if n.startswith("cpp_fused_convolution")]
    assert named and all(kinds[n] == "copy" for n in named), kinds
    assert any(k != "copy" for n, k in kinds.items() if n.startswith("cpp_fused_mean_relu")), kinds
    table = run_cli("explain", str(model), "--no-timings", "--device", "cpu").stdout
    assert (
        "copy (moves data, computes nothing)" in table and "lays out data for convolution" in table
    )


@pytest.mark.parametrize("folder", trace_sets(), ids=lambda p: p.name)
def test_every_recorded_kernel_computes_what_its_name_says(folder: Path) -> None:
    """Kernels of the recorded traces each compute (none is a mere copy) and name ops."""
    from compilediag.analysis.compile.kernels import all_kernels

    for path in sorted(folder.rglob("*.log")):
        for graph in all_kernels(build_history(parse_path(path))):
            for k in graph.kernels:
                if k.kernel.kind != "extern":
                    assert k.kernel.kind != "copy" and k.kernel.ops, (path.name, k.kernel)


def test_a_cached_kernels_lines_point_at_this_runs_file() -> None:
    """Inductor's cache hands back a kernel with the source lines of the compile that filled
    it, perhaps run from another checkout: the report points them at the file this run
    compiled (same folder and name), and leaves lines of other files alone."""
    from compilediag.analysis.compile.kernels import relocated
    from compilediag.report.model import Kernel

    history = build_history(parse_path(fixture_trace("graph_breaks.eager")))
    here = history.entries[0].metrics.co_filename
    elsewhere = "/other/checkout/" + "/".join(here.split("/")[-2:])
    k = Kernel(name="cpp_fused_0", kind="pointwise", compile_id="0/0",
               source_lines=[f"{elsewhere}:18", f"{here}:21", "/lib/x/other.py:3"])  # fmt: skip
    (moved,) = relocated([k], history)
    assert moved.source_lines == [f"{here}:18", f"{here}:21", "/lib/x/other.py:3"]


def _lines_with_and_without_provenance(logs: list) -> list[tuple[str, list[str], list[str]]]:
    """For each generated kernel Inductor's provenance records place: its name, the lines
    they give, and the lines compilediag matches with those records taken out."""
    import copy

    from compilediag.analysis.history import history_of

    out = []
    for e in build_history(logs):
        c = e.compile
        if not any(n.startswith("inductor_provenance") for n in c.artifacts):
            continue
        bare = copy.copy(c)
        bare.artifacts = {n: v for n, v in c.artifacts.items() if not n.startswith("inductor_prov")}
        recorded = [k.kernel for g in collect_kernels(history_of([c])) for k in g.kernels]
        matched = [k.kernel for g in collect_kernels(history_of([bare])) for k in g.kernels]
        for a, b in zip(recorded, matched, strict=True):
            assert a.name == b.name
            if a.kind != "extern" and a.source_lines:
                out.append((a.name, a.source_lines, b.source_lines))
    return out


def _check_matched_lines(pairs: list[tuple[str, list[str], list[str]]], share: float) -> None:
    assert pairs, "no kernel with provenance records"
    for name, recorded, matched in pairs:
        assert set(matched) <= set(recorded), (name, recorded, matched)
    placed = sum(bool(m) for _, _, m in pairs)
    assert placed >= share * len(pairs), pairs


@pytest.mark.parametrize("folder", trace_sets("transformer_block.inductor"), ids=lambda p: p.name)
def test_kernel_lines_matched_without_provenance_are_lines_torch_records(folder: Path) -> None:
    """compilediag no longer sets INDUCTOR_PROVENANCE (a cache-key component): a kernel's
    lines are matched from the ops its name holds and the Dynamo graph. On recordings made
    with provenance, the matched lines are among those Inductor's own records give, and
    every kernel gets one (a forward block: layer norm, attention, MLP)."""
    logs = parse_path(fixture_trace("transformer_block.inductor", folder))
    if not any(n.startswith("inductor_prov") for c in logs[0].ordered() for n in c.artifacts):
        pytest.skip(f"{folder.name} was recorded without provenance records")
    pairs = _lines_with_and_without_provenance(logs)
    _check_matched_lines(pairs, share=1.0)


TRAIN_STEP = """\
import sys

import torch
from torch import nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        q, k, v = self.qkv(self.ln1(x)).chunk(3, -1)
        att = (q @ k.transpose(-1, -2) / 8).softmax(-1)
        x = x + self.proj(att @ v)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(Block(), Block())
        self.head = nn.Linear(32, 10)

    def forward(self, x, y):
        h = self.blocks(x).mean(1)
        return F.cross_entropy(self.head(torch.tanh(h)), y)


device = sys.argv[1] if len(sys.argv) > 1 else "cpu"
model = torch.compile(Net().to(device))
opt = torch.optim.AdamW(model.parameters())
for _ in range(2):
    x, y = torch.randn(4, 6, 32, device=device), torch.randint(0, 10, (4,), device=device)
    model(x, y).backward()
    opt.step()
    opt.zero_grad()
"""


@pytest.mark.slow
def test_a_training_steps_kernel_lines_without_provenance_are_torchs(tmp_path: Path) -> None:
    """The same on a training step, forward and backward, recorded now with provenance on
    (private caches): no matched line is one Inductor's records do not give; most kernels
    (13 of 21 on 2.13, 12 on 2.15) are placed, the rest left without a line rather than
    guessed."""
    _check_matched_lines(_train_step_pairs(tmp_path, "cpu"), share=0.5)


ANY_STEP = """\
import torch
from torch import nn


class Gate(nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.ln = nn.LayerNorm(d)

    def forward(self, x):
        h = self.ln(x) + x
        bad = torch.isnan(h).any()
        return torch.where(bad, torch.zeros_like(h), h)


model = torch.compile(Gate())
model(torch.randn(4, 6, 32))
"""


@pytest.mark.slow
def test_a_common_op_one_line_alone_computes_places_its_kernel_there_too(tmp_path: Path) -> None:
    """#62: a forward kernel that fuses a layer norm, an add and the only `.any()` of the
    forward gets the `.any()` line too (it once got the layer norm's alone); every line
    matched is one Inductor's provenance records give."""
    _placed_at(_recorded_pairs(tmp_path, ANY_STEP), ANY_STEP, ".any()", "_any_")


POOL_STEP = """\
import torch
from torch import nn
import torch.nn.functional as F


class Conv(nn.Module):
    def __init__(self):
        super().__init__()
        self.c, self.bn = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)

    def forward(self, x):
        x = F.gelu(self.bn(self.c(x)))
        return F.max_pool2d(x, 2).flatten(1)


model = torch.compile(Conv().eval())
model(torch.randn(2, 3, 8, 8))
"""


@pytest.mark.slow
def test_a_pooling_kernel_is_placed_at_the_pooling_line_too(tmp_path: Path) -> None:
    """A twentieth look: the kernel Inductor fused from a batch norm, a gelu and the next
    line's F.max_pool2d (its ATen op max_pool2d_with_indices) was placed at the first line
    alone; Inductor's records give both."""
    _placed_at(_recorded_pairs(tmp_path, POOL_STEP), POOL_STEP, "max_pool2d", "max_pool2d")


def _recorded_pairs(tmp_path: Path, source: str) -> list[tuple[str, list[str], list[str]]]:
    """`source` run as a script with Inductor's provenance records on (its own caches):
    each kernel's lines by the records, and as matched without them."""
    import os
    import subprocess
    import sys

    (tmp_path / "job.py").write_text(source)
    env = {**os.environ, "INDUCTOR_PROVENANCE": "1", "TORCH_TRACE": str(tmp_path / "trace"),
           "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache")}  # fmt: skip
    subprocess.run([sys.executable, "job.py"], cwd=tmp_path, env=env, check=True, timeout=600)
    return _lines_with_and_without_provenance(parse_path(tmp_path / "trace"))


def _placed_at(pairs: list, source: str, code: str, kernel: str) -> None:
    """Every matched line is one the records give; each kernel whose name holds `kernel`
    is placed at the line of `source` that holds `code`."""
    _check_matched_lines(pairs, share=1.0)
    line = next(i for i, x in enumerate(source.splitlines(), 1) if code in x)
    found = [m for name, _, m in pairs if kernel in name]
    assert found and all(any(x.endswith(f":{line}") for x in m) for m in found), pairs


NORMALIZE_STEP = """\
import torch
import torch.nn.functional as F
from torch import nn


class Pooler(nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        h = self.proj(x).transpose(1, 2)
        out = F.avg_pool1d(h, 4).mean(-1)
        return F.normalize(out, dim=-1)


model = torch.compile(Pooler())
model(torch.randn(2, 24, 32))
"""


@pytest.mark.slow
def test_a_kernel_of_a_calls_decomposed_ops_gets_that_calls_line(tmp_path: Path) -> None:
    """F.normalize is one Dynamo node (`normalize`) and its kernel's ops are what it
    decomposed to (clamp_min, div, linalg_vector_norm): its line came from no match, and the
    kernel read "from L13" alone (a thirteenth look's F10; Inductor's records: 13 and 14).
    The AOT graph's nodes place the ops the Dynamo graph can't; every matched line is one
    Inductor's provenance records give, the normalize line among them."""
    pairs = _recorded_pairs(tmp_path, NORMALIZE_STEP)
    _placed_at(pairs, NORMALIZE_STEP, "F.normalize", "clamp_min")


RESNET_STEP = """\
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.act1 = nn.ReLU()
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.act2 = nn.ReLU()
        self.downsample = None
        if stride != 1 or cin != cout:  # an average-pooled shortcut
            self.downsample = nn.Sequential(
                nn.AvgPool2d(2, stride, ceil_mode=True), nn.Conv2d(cin, cout, 1, bias=False),
                nn.BatchNorm2d(cout),
            )

    def forward(self, x):
        shortcut = x
        x = self.conv1(x)
        x = self.bn1(x)
        x = self.act1(x)
        x = self.conv2(x)
        x = self.bn2(x)
        if self.downsample is not None:
            shortcut = self.downsample(shortcut)
        x += shortcut
        return self.act2(x)


class Net(nn.Module):
    def __init__(self, widths=(8, 16, 32, 64)):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
            nn.Conv2d(8, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
            nn.Conv2d(8, 8, 3, 1, 1, bias=False),
        )
        self.bn1, self.act1, self.pool = nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(3, 2, 1)
        cins = (8, *widths[:-1])
        self.layers = nn.Sequential(
            *[Block(a, b, 1 if i == 0 else 2) for i, (a, b) in enumerate(zip(cins, widths))]
        )
        self.fc = nn.Linear(widths[-1], 10)

    def forward(self, x):
        x = self.pool(self.act1(self.bn1(self.stem(x))))
        x = self.layers(x)
        return self.fc(x.mean((2, 3)))


torch.manual_seed(0)
model = torch.compile(Net().eval())
with torch.no_grad():
    model(torch.randn(1, 3, 32, 32))
"""


@pytest.mark.slow
def test_a_resnets_kernels_take_no_other_blocks_line(tmp_path: Path) -> None:
    """A twenty-first look's timm resnet10t under Inductor, no provenance: 12 of its 15
    kernels were given a line Inductor's records do not (a kernel named for a convolution,
    which lays out its input, took the stem's; a later block's the earlier's), and a
    twenty-second look's resnet18 on 2.15 12 of 16 by the ops their names hold. A C++
    kernel's lines now come from the graph inputs its call reads (its batch norm's running
    stats, the weight it lays out) and where their nodes' outputs flow: every kernel of
    this resnet in its style (a deep stem, average-pooled shortcuts) placed, each line one
    the records give, a layout kernel at its convolution's."""
    pairs = _recorded_pairs(tmp_path, RESNET_STEP)
    _check_matched_lines(pairs, share=1.0)
    layout = [m for n, _, m in pairs if n.startswith("cpp_fused_convolution_")]
    conv = next(i for i, x in enumerate(RESNET_STEP.splitlines(), 1) if "x = self.conv1(x)" in x)
    assert layout and all(m and m[0].endswith(f":{conv}") for m in layout), pairs


SQUEEZE_STEP = """\
import torch
from torch import nn


class SqueezeExcite(nn.Module):
    def __init__(self, c, r=4):
        super().__init__()
        self.conv_reduce = nn.Conv2d(c, c // r, 1)
        self.act1 = nn.SiLU()
        self.conv_expand = nn.Conv2d(c // r, c, 1)

    def forward(self, x):
        x_se = x.mean((2, 3), keepdim=True)
        x_se = self.conv_reduce(x_se)
        x_se = self.act1(x_se)
        x_se = self.conv_expand(x_se)
        return x * x_se.sigmoid()


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(c)
        self.act = nn.SiLU()
        self.se = SqueezeExcite(c)

    def forward(self, x):
        x = self.act(self.bn(self.conv(x)))
        return self.se(x)


model = torch.compile(nn.Sequential(Block(16), Block(16)).eval())
with torch.no_grad():
    model(torch.randn(1, 16, 8, 8))
"""


@pytest.mark.slow
def test_a_kernel_reading_a_library_calls_output_is_placed_after_it(tmp_path: Path) -> None:
    """A twenty-third look's timm efficientnet and mobilenet: the squeeze-excite's SiLU,
    a kernel that reads only the reducing convolution's output (no weight of its own), was
    placed at the block's batch-norm SiLU, another line with the same op (7 of 48 kernels
    wrong). A kernel reading a buffer a library call made starts after that call's node:
    every line one Inductor's records give, the SE's SiLU at its own line."""
    pairs = _recorded_pairs(tmp_path, SQUEEZE_STEP)
    _check_matched_lines(pairs, share=1.0)
    line = next(
        i for i, x in enumerate(SQUEEZE_STEP.splitlines(), 1) if "x_se = self.act1(x_se)" in x
    )
    alone = [m for n, _, m in pairs if re.fullmatch(r"cpp_fused_silu_\d+", n)]
    assert alone and all(any(x.endswith(f":{line}") for x in m) for m in alone), pairs


RESIDUAL_STEP = """\
import torch
from torch import nn


class Norm(nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        var = x.pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(var + 1e-6) * self.weight


class Block(nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.norm = Norm(d)
        self.proj = nn.Linear(d, d, bias=False)

    def forward(self, x):
        h = torch.tanh(self.proj(self.norm(x)))
        return x + self.proj(h)


model = torch.compile(Block())
model(torch.randn(4, 6, 32))
"""


@pytest.mark.slow
def test_a_common_op_a_kernel_before_fused_on_its_lines_is_not_a_later_kernels(
    tmp_path: Path,
) -> None:
    """A sixteenth look: the residual `x + self.proj(h)` kernel (its ops: a view and an
    add) read "from" the norm's `var + eps` line, whose add the norm's kernel had fused. A
    kernel placed by its telling ops takes its common ops on those lines; the residual's
    kernel is placed at the residual's line, as Inductor's records have it."""
    pairs = _recorded_pairs(tmp_path, RESIDUAL_STEP)
    _placed_at(pairs, RESIDUAL_STEP, "return x + self.proj(h)", "_view_add_")


@pytest.mark.gpu
def test_triton_kernel_lines_without_provenance_are_torchs(tmp_path: Path) -> None:
    """On CUDA: Triton kernels' calls carry Inductor's source-node comments; with them and
    the ops, every placed line is one the provenance records give."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    _check_matched_lines(_train_step_pairs(tmp_path, "cuda"), share=0.5)


def _train_step_pairs(tmp_path: Path, device: str) -> list[tuple[str, list[str], list[str]]]:
    import os
    import subprocess
    import sys

    (tmp_path / "train.py").write_text(TRAIN_STEP)
    env = {**os.environ, "INDUCTOR_PROVENANCE": "1", "TORCH_TRACE": str(tmp_path / "trace"),
           "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache")}  # fmt: skip
    subprocess.run([sys.executable, "train.py", device], cwd=tmp_path, env=env, check=True,
                   timeout=600)  # fmt: skip
    return _lines_with_and_without_provenance(parse_path(tmp_path / "trace"))


FIX = """\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        h = self.fc(x).relu()
        return (h * 2).sin()


torch.manual_seed(0)
with torch.no_grad():
    torch.compile(Net())(torch.randn(4, 8))
"""


@pytest.mark.slow
def test_after_a_cache_hit_kernels_name_this_runs_file(tmp_path: Path) -> None:
    """Two scripts with the same model, the second's lines three further down: the second
    takes its graph from the FX cache the first filled, with the first's provenance
    records. Before: its kernels said `from train_fix1.py:12`; now this run's file and
    lines (its Dynamo graph's own)."""
    import os
    import subprocess
    import sys

    first, second = tmp_path / "train_fix1.py", tmp_path / "train_fix2.py"
    first.write_text(FIX)
    second.write_text("# one\n# two\n# three\n" + FIX)
    env = {**os.environ, "INDUCTOR_PROVENANCE": "1",
           "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache")}  # fmt: skip
    subprocess.run([sys.executable, str(first)], env=env, check=True, timeout=600)
    trace = tmp_path / "trace"
    subprocess.run([sys.executable, str(second)], env={**env, "TORCH_TRACE": str(trace)},
                   check=True, timeout=600)  # fmt: skip
    report, proc = run_json("report", str(trace))
    assert proc.returncode == 0, proc.stderr
    assert report["compile_time"]["caches"].get("fx_graph_cache_hit") == 1, report["compile_time"]
    lines = [p for k in report["kernels"] for p in k["source_lines"]]
    assert lines and all(p.rsplit(":", 1)[0].endswith("train_fix2.py") for p in lines), lines
    assert {int(p.rsplit(":", 1)[1]) for p in lines} <= {14, 15}  # the forward's two lines


def test_every_recorded_kernels_ops_are_aten_ops() -> None:
    """Every op a kernel is said to compute, on every recording of every release, is an op
    the running torch has, in the namespace it is named with (before: `_log_softmax` read as
    `aten.`, `aten.log`, `aten.softmax`; `mul_sgn` as one op; `all_reduce` as aten's
    `all` and `reduce`)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("torch._inductor.compile_fx")  # registers Inductor's own prims ops

    from compilediag.analysis.compile.kernels import all_kernels
    from compilediag.analysis.history import build_history

    # (prims.prepare_softmax_online, in a 2.11 CUDA recording, is registered by Inductor's
    # import: alone, the test failed; after a test that compiled, it passed)
    seen, missing = 0, set()
    for folder in trace_sets():
        for path in sorted(folder.rglob("*.log*")):
            try:
                logs = parse_path(path)
            except Exception:  # noqa: BLE001 - a recording of damage, read by its own test
                continue
            for g in all_kernels(build_history(logs)):
                for k in g.kernels:
                    for op in k.kernel.ops:
                        seen += 1
                        ns, _, name = op.partition(".")
                        if not hasattr(getattr(torch.ops, ns), name):
                            missing.add((path.name, k.kernel.name, op))
    assert seen > 400  # the recordings hold that many: the walk read them
    assert not missing, sorted(missing)[:20]


def test_lines_matched_by_ops_alone_are_said_to_be_a_guess() -> None:
    """A nineteenth look: resnet18 under explain (no provenance records, compilediag does
    not turn them on) gave most kernels another block's line, with no word that the lines
    were guessed. With the records left out of a recorded trace, every kernel still gets
    lines from the graph, and a note says so, by ops a guess where an op sits
    on several lines; with the records, no such note."""
    from compilediag.analysis.build import build_report
    from compilediag.harness.worker_types import WorkerResult
    from compilediag.report.model import TargetInfo

    path = fixture_trace("transformer_block.inductor")
    logs = parse_path(path)
    kept = build_report(logs, WorkerResult(), TargetInfo(path="x.py"))
    assert not [n for n in kept.notes if n.kind == "no_provenance"]
    for log in logs:
        for c in log.ordered():
            c.artifacts.pop("inductor_provenance_tracking_kernel_stack_traces", None)
            c.artifacts.pop("inductor_provenance_tracking_node_mappings", None)
    report = build_report(logs, WorkerResult(), TargetInfo(path="x.py"))
    generated = [k for k in report.kernels if k.kind != "extern"]
    assert generated and all(k.source_lines for k in generated)
    (note,) = [n.message for n in report.notes if n.kind == "no_provenance"]
    assert note.startswith(f"The {len(generated)} generated kernels' lines were matched from the")
    assert "a guess" in note and "INDUCTOR_PROVENANCE=1" in note, note
