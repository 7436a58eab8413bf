"""End to end: the installed CLI on the sample models, in a subprocess, on the real stack."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.conftest import (
    SAMPLES,
    assert_timings_consistent,
    expected_breaks,
    run_cli,
    run_json,
    shared_json,
)

# the whole suite's (`pytest --full`): end-to-end runs, minutes on 2 cores (docs/tests.md)
pytestmark = pytest.mark.full

BREAKING = {
    "print_break.py": "print",
    "data_branch.py": "data_dependent_branch",
    "item_break.py": "item",
    "numpy_break.py": "numpy",
    "logging_break.py": "logging",
    "nonzero_break.py": "dynamic_output_shape",
}


@pytest.mark.parametrize("sample", sorted(BREAKING))
def test_each_cause_is_reported_at_the_users_line_and_agrees_with_explain(sample: str) -> None:
    report, proc = run_json(
        "explain", f"sample_models/{sample}", "--backend", "aot_eager", "--cross-check",
        "--device", "cpu", "--repeat", "5", "--warmup", "2",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert_timings_consistent(report, "aot_eager", repeat=5, warmup=2)
    breaks = report["graph_breaks"]
    assert [b["line"] for b in breaks] == expected_breaks(sample)
    b = breaks[0]
    assert Path(b["file"]).name == sample
    assert b["cause"] == BREAKING[sample]
    src = (SAMPLES / sample).read_text().splitlines()[b["line"] - 1].strip()
    assert b["code"] == src
    assert b["suggestion"] and b["reason"]
    assert report["summary"]["unique_graph_breaks"] == 1
    assert report["cross_check"]["agree"], report["cross_check"]
    assert report["cross_check"]["explain_graph_breaks"] == 1


CLEAN = ["clean_mlp.py", "transformer_block.py"]


def clean_run(sample: str) -> tuple[str, ...]:
    """The run of a clean model (Inductor: its kernels and numerics on a real model), shared
    with the kernel tests (tests.conftest.shared_json)."""
    return ("explain", f"sample_models/{sample}", "--device", "cpu", "--repeat", "5",
            "--warmup", "2")  # fmt: skip


@pytest.mark.parametrize("sample", CLEAN)
def test_clean_models_have_one_graph_and_no_breaks(sample: str) -> None:
    report, proc = shared_json(*clean_run(sample))
    assert proc.returncode == 0, proc.stderr
    assert_timings_consistent(report, "inductor", repeat=5, warmup=2)
    assert report["summary"]["graph_breaks"] == 0
    assert report["summary"]["graphs"] == 1
    assert report["graphs"][0]["ops"] > 3


def test_graph_breaks_demo_table_view() -> None:
    proc = run_cli("explain", "sample_models/graph_breaks.py", "--backend", "eager", "--no-timings")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "3 graph breaks at 3 sites" in out
    for line in expected_breaks("graph_breaks.py"):
        assert f"sample_models/graph_breaks.py:{line}" in out
    assert "\x1b[" not in out, "no colour when piped"
    assert max(len(x) for x in out.splitlines()) <= 100


def test_fullgraph_gate_reports_all_breaks_then_fails() -> None:
    report, proc = run_json(
        "explain",
        "sample_models/graph_breaks.py",
        "--backend",
        "eager",
        "--no-timings",
        "--fullgraph",
    )
    assert proc.returncode == 1
    assert len(report["graph_breaks"]) == 3, "all breaks, not only the first"
    assert report["verdict"]["passed"] is False
    clean, proc = run_json(
        "explain", "sample_models/clean_mlp.py", "--backend", "eager", "--no-timings", "--fullgraph"
    )
    assert proc.returncode == 0 and clean["verdict"]["passed"] is True


def test_break_inside_a_library_shows_the_users_call_site(tmp_path: Path) -> None:
    lib = tmp_path / "venv" / "lib" / "python3.11" / "site-packages" / "fancylib"
    lib.mkdir(parents=True)
    (lib / "__init__.py").write_text(
        "def helper(x):\n    print('in a library')\n    return x * 2\n"
    )
    model = tmp_path / "model.py"
    model.write_text(
        textwrap.dedent(f"""\
        import sys
        sys.path.insert(0, {str(lib.parent)!r})
        import torch
        from fancylib import helper

        class M(torch.nn.Module):
            def forward(self, x):
                y = x.sin()
                y = helper(y)
                return y.cos()

        def get_inputs():
            return (torch.randn(3),)
    """)
    )
    report, proc = run_json("explain", str(model), "--backend", "eager", "--no-timings")
    assert proc.returncode == 0, proc.stderr
    (b,) = report["graph_breaks"]
    assert (Path(b["file"]).name, b["line"], b["code"]) == ("model.py", 9, "y = helper(y)")
    assert b["library_frame"]["file"].endswith("fancylib/__init__.py")
    assert b["library_frame"]["line"] == 2


def test_cross_check_explains_a_break_that_explain_misses(tmp_path: Path) -> None:
    # print before any tensor op: no graph is cut, so explain has nothing to report
    model = tmp_path / "early_print.py"
    model.write_text(
        textwrap.dedent("""\
        import torch

        class M(torch.nn.Module):
            def forward(self, x):
                print("start")
                return x.sin().cos()

        def get_inputs():
            return (torch.randn(3),)
    """)
    )
    report, proc = run_json(
        "explain", str(model), "--backend", "eager", "--no-timings", "--cross-check"
    )
    assert proc.returncode == 0, proc.stderr
    assert [b["line"] for b in report["graph_breaks"]] == [5]
    cc = report["cross_check"]
    assert cc["agree"] is False and cc["explain_graph_breaks"] == 0
    (d,) = cc["disagreements"]
    assert d["line"] == 5 and d["seen_by"] == "trace"
    assert "no tensor op ran before this break" in d["believe"]


def test_json_is_alone_on_stdout() -> None:
    proc = run_cli(
        "explain",
        "sample_models/print_break.py",
        "--backend",
        "eager",
        "--no-timings",
        "--format",
        "json",
    )
    data = json.loads(proc.stdout)  # the model's own print went to the worker log, not here
    for key in (
        "schema_version",
        "tool",
        "environment",
        "target",
        "summary",
        "graph_breaks",
        "recompiles",
        "graphs",
        "kernels",
        "timings",
        "errors",
    ):
        assert key in data
    assert data["environment"]["backend"] == "eager"
    assert data["target"]["inputs"] == ["4x16:float32"]


def test_markdown_format() -> None:
    proc = run_cli(
        "explain",
        "sample_models/item_break.py",
        "--backend",
        "eager",
        "--no-timings",
        "--format",
        "markdown",
    )
    assert proc.returncode == 0
    assert proc.stdout.startswith("## compilediag: `sample_models/item_break.py`")
    assert "| 1 | `sample_models/item_break.py:15`" in proc.stdout


def test_inputs_from_the_command_line_replace_get_inputs() -> None:
    report, proc = run_json(
        "explain",
        "sample_models/clean_mlp.py",
        "--backend",
        "eager",
        "--no-timings",
        "--input",
        "3x32",
    )
    assert proc.returncode == 0, proc.stderr
    assert report["target"]["inputs"] == ["3x32:float32"]


def test_train_step_compiles_forward_and_backward() -> None:
    report, proc = run_json(
        "explain", "sample_models/clean_mlp.py", "--backend", "aot_eager", "--no-timings", "--train"
    )
    assert proc.returncode == 0, proc.stderr
    assert report["environment"]["train"] is True
    assert report["summary"]["graphs"] == 1 and report["summary"]["graph_breaks"] == 0
    # AOTAutograd compiled a backward too: its compile is in the AOT phase
    assert report["compile_time"]["aot_s"] > 0


GRAD_MODES = """
import torch
from torch import nn


class Running(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(6, 6)
        self.register_buffer("mean", torch.zeros(6))

    def forward(self, x):
        h = self.proj(x).relu()
        with torch.no_grad():
            self.mean.mul_(0.9).add_(0.1 * h.mean(0))
        return h - self.mean


def get_model():
    return Running()


def get_inputs():
    return (torch.randn(3, 6),)
"""


@pytest.mark.parametrize("train", [False, True])
def test_a_graphs_ops_are_torchs_count_in_the_grad_mode_the_header_names(
    tmp_path: Path, train: bool
) -> None:
    """torch traces a model with a no_grad region into a different graph with grad on than
    off: each graph's ops equal CompileCounter's count in the mode the header names."""
    import torch
    from torch._dynamo.testing import CompileCounter

    model = tmp_path / "running.py"
    model.write_text(GRAD_MODES)
    flags = ["--train"] if train else []
    out = tmp_path / "r.json"
    proc = run_cli(
        "explain", str(model), "--backend", "eager", "--no-timings", *flags,
        "--format", "json", "-o", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    shown = run_cli("render", str(out)).stdout
    (head,) = [line for line in shown.splitlines() if line.startswith("torch ")]
    assert head.endswith("+train" if train else "eager/default no_grad"), shown

    namespace: dict = {}
    exec(compile(GRAD_MODES, str(model), "exec"), namespace)
    torch._dynamo.reset()
    counter = CompileCounter()
    with torch.set_grad_enabled(train):
        torch.compile(namespace["get_model"](), backend=counter)(*namespace["get_inputs"]())
    graphs = json.loads(out.read_text())["graphs"]
    assert [g["ops"] for g in graphs] == [counter.op_count], (graphs, counter.op_count)
    # the docs' words: explain's op_count counts the function calls alone (not `.relu()`)
    torch._dynamo.reset()
    with torch.set_grad_enabled(train):
        ex = torch._dynamo.explain(namespace["get_model"]())(*namespace["get_inputs"]())
    functions = [n for g in ex.graphs for n in g.graph.nodes if n.op == "call_function"]
    assert ex.op_count == len(functions) < graphs[0]["ops"], (ex.op_count, graphs)


def test_get_model_may_return_a_plain_function(tmp_path: Path) -> None:
    model = tmp_path / "fn_model.py"
    model.write_text(
        "import torch\n"
        "def scaled_gelu(x):\n"
        "    return torch.nn.functional.gelu(x) * 2\n"
        "def get_model():\n"
        "    return scaled_gelu\n"
        "def get_inputs():\n"
        "    return (torch.randn(4, 8),)\n"
    )
    report, proc = run_json("explain", str(model), "--backend", "eager", "--no-timings")
    assert proc.returncode == 0, proc.stderr
    assert report["summary"]["graphs"] == 1


def test_explain_compiles_once_on_the_first_inputs() -> None:
    """A file with a sweep: explain runs its first input set only (recompiles runs all)."""
    report, proc = run_json(
        "explain", "sample_models/changing_batch.py", "--backend", "eager", "--no-timings"
    )
    assert proc.returncode == 0, proc.stderr
    assert len(report["calls"]) == 1 and report["summary"]["recompiles"] == 0
    first = report["calls"][0]
    assert report["timings"]["first_call_s"] >= first["compile_time_s"]


README_EXAMPLE = """
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 8)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def get_model():
    return Net()


def get_inputs():
    return (torch.randn(WIDTH_IN_GET_INPUTS, 16),)


def get_input_sets():
    return [(torch.randn(b, 16),) for b in (2, 8)]
"""


def test_explain_runs_get_inputs_and_recompiles_the_sweep(tmp_path: Path) -> None:
    """The README's complete file: explain compiles on get_inputs() (4x16), not the first
    of get_input_sets() (2x16); recompiles runs the sweep; a get_inputs() that doesn't fit
    the model is the model's error (exit 3), not skipped."""
    model = tmp_path / "net.py"
    model.write_text(README_EXAMPLE.replace("WIDTH_IN_GET_INPUTS, 16", "4, 16"))
    report, proc = run_json("explain", str(model), "--backend", "eager", "--no-timings")
    assert proc.returncode == 0, proc.stderr
    assert [c.split(":")[0] for c in report["target"]["inputs"]] == ["4x16"]
    sweep, proc = run_json("recompiles", str(model))
    assert proc.returncode == 0, proc.stderr
    assert [c.split(":")[0] for c in sweep["target"]["inputs"]] == ["2x16", "8x16"]
    model.write_text(README_EXAMPLE.replace("WIDTH_IN_GET_INPUTS, 16", "4, 15"))
    proc = run_cli("explain", str(model), "--backend", "eager", "--no-timings")
    assert proc.returncode == 3, proc.stderr
    assert "failed without torch.compile" in proc.stderr and "4x15" in proc.stderr


def test_a_run_that_compiled_nothing_says_so(tmp_path: Path) -> None:
    """Dynamo was entered but no graph came out: the headline says the model ran eager, as
    torch's own counters do (no unique graph)."""
    import torch

    model = tmp_path / "nothing.py"
    model.write_text(
        "import torch\n"
        "class M(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        print('start')\n"
        "        return x\n"
        "def get_inputs():\n"
        "    return (torch.randn(2, 4),)\n"
    )
    report, proc = run_json("explain", str(model), "--backend", "eager", "--no-timings")
    assert proc.returncode == 0, proc.stderr
    assert report["summary"]["graphs"] == 0
    assert report["notes"][0]["kind"] == "nothing_compiled"
    assert report["notes"][0]["message"].startswith("torch.compile produced no graph")
    from torch._dynamo.testing import CompileCounter

    counter = CompileCounter()
    torch._dynamo.reset()
    spec = __import__("importlib.util").util.spec_from_file_location("nothing", model)
    module = __import__("importlib.util").util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.compile(module.M(), backend=counter)(torch.randn(2, 4))
    torch._dynamo.reset()
    assert counter.frame_count == 0
    # `recompiles` shows the breaks its note points to (it shows none where graphs compiled)
    proc = run_cli("recompiles", str(model), "--backend", "eager")
    assert proc.returncode == 0, proc.stderr
    below = proc.stdout.split("No recompiles.", 1)[1]
    assert "Graph breaks (1 site)" in below and "print('start')" in below, proc.stdout


def test_what_explains_own_run_took_is_said_by_phase() -> None:
    """report.took_s (#74): compilediag's own run, phase by phase, adds up to the command's
    wall time less the CLI's own start and its printing; the timing phase holds at least
    the blocks the report says it timed, each of its calls eager and compiled; the table
    says it in one line."""
    import time

    args = ("explain", "sample_models/item_break.py", "--backend", "aot_eager", "--device",
            "cpu", "--repeat", "5", "--warmup", "2")  # fmt: skip
    started = time.monotonic()
    report, proc = run_json(*args)
    wall = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr
    took, t = report["took_s"], report["timings"]
    for phase in ("compile and first calls", "timing", "numerics check", "trace read",
                  "kernels read", "worker start and exit"):  # fmt: skip
        assert phase in took, (phase, took)
    # aot_eager's graphs are not in torch.profiler's events: no pass is made for a breakdown
    # that would be none
    assert "timing: the profiler's pass" not in took and t.get("breakdown") is None, took
    assert wall - 3.0 <= sum(took.values()) <= wall, (took, wall)
    blocks = (
        t["repeat"] * t["calls_per_block"] * (t["eager_ms"]["median"] + t["compiled_ms"]["median"])
    )
    assert took["timing"] >= 0.5 * blocks / 1e3, (took["timing"], blocks)
    # (the row wraps where its figures put it: "compile and" ended one line in a CI run)
    table = " ".join(run_cli(*args).stdout.split())
    assert "compilediag's run, " in table and "compile and first calls " in table


def test_cross_check_says_a_break_in_a_frame_torch_skipped_splits_nothing(tmp_path: Path) -> None:
    """A twenty-third look: breaks in frames torch gave up (it logs "Skipping the function
    and falling back to eager") read "It still splits the frame and costs a resume
    function". torch skips a frame whose break is in a loop; the cross-check says so."""
    model = tmp_path / "loop_print.py"
    model.write_text(
        textwrap.dedent("""\
        import torch

        class M(torch.nn.Module):
            def forward(self, x):
                for i in range(2):
                    x = x.sin()
                    print("layer", i)
                return x

        def get_inputs():
            return (torch.randn(3),)
    """)
    )
    report, proc = run_json(
        "explain", str(model), "--backend", "eager", "--no-timings", "--cross-check"
    )
    assert proc.returncode == 0, proc.stderr
    skipped = [n for n in report["notes"] if n["kind"] == "skipped_frame"]
    assert skipped and "runs in eager mode" in skipped[0]["message"]  # torch's skip, said
    (d,) = report["cross_check"]["disagreements"]
    assert d["line"] == 7 and d["seen_by"] == "trace"
    assert "torch gave up the frame this break is in" in d["believe"], d
    assert "resume function" not in d["believe"]


def test_a_model_fed_a_sparse_tensor_is_reported_not_crashed_on() -> None:
    """A look's GCN (pytorch/examples, its sparse adjacency an input): "compilediag's worker
    failed: NotImplementedError: Could not run 'aten::equal' with arguments from the
    'SparseCPU' backend ... This is a compilediag bug", exit 5; torch ran it (graph_count 0).
    The inputs' and outputs' checks compare a sparse tensor dense; the counts are torch's."""
    import importlib.util

    import torch

    path = SAMPLES / "breaks" / "b47_sparse_input.py"
    report, proc = run_json("explain", str(path), "--backend", "eager")
    assert proc.returncode == 0, proc.stderr[-2000:]
    spec = importlib.util.spec_from_file_location("b47", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch._dynamo.reset()
    said = torch._dynamo.explain(module.get_model())(*module.get_inputs())
    torch._dynamo.reset()
    assert report["summary"]["graphs"] == said.graph_count == 0
    assert [(b["line"], b["cause"]) for b in report["graph_breaks"]] == [(20, "sparse_tensor")]
    assert report["numerics"]["verdict"] == "match" and report["timings"]["outputs_match"]
    assert report["timings"]["mutated_inputs"] == []
