"""Every torch text format compilediag reads (compilediag/trace/formats.py), pinned on
traces recorded from real runs, for every torch version we have a recording of."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from compilediag.analysis.compile.kernel_origins import node_lines
from compilediag.analysis.compile.kernels import kernels_of_graph
from compilediag.analysis.recompiles.guards import guarded_chain
from compilediag.paths import is_library_file
from compilediag.trace.compiles import CompilationMetrics, CompileId
from compilediag.trace.formats import (
    CACHE_CONFIG,
    CACHE_INPUT,
    CACHE_RECORDS,
    GUARD_DICT_CONTAINS,
    GUARD_RANGE,
    GUARD_SIZE,
    GUARDS_EQUALS_MATCH,
    KERNEL_DEFINITION,
    RESUME,
    SOURCE_NODES,
    TENSOR_META_DTYPE,
    TENSOR_META_SHAPE,
    frame_name,
    guard_pattern,
    guard_text,
    parse_break_text,
    source_name,
    split_recompile_reasons,
)
from compilediag.trace.parse import parse_path
from tests.conftest import SAMPLES, expected_breaks, fixture_trace, trace_sets

SETS = trace_sets("graph_breaks.eager")


def _version(folder: Path) -> tuple[int, int]:
    major, minor = folder.name.split("-")[1].split(".")[:2]
    return int(major), int(minor)


def _log(name: str, folder: Path):
    (log,) = parse_path(fixture_trace(name, folder))
    return log


@pytest.mark.parametrize("folder", SETS, ids=lambda p: p.name)
def test_break_text_gives_reason_id_and_the_user_line(folder: Path) -> None:
    log = _log("graph_breaks.eager", folder)
    lines = []
    for c in log.ordered():
        for b in c.graph_breaks:
            parsed = parse_break_text(b.text)
            assert parsed.reason
            if _version(folder) >= (2, 8):  # GB ids, explanations and hints came in 2.8
                assert parsed.gb_id and re.fullmatch(r"GB\d{4}", parsed.gb_id)
                assert parsed.doc_url
                assert parsed.doc_url.lower().endswith(parsed.gb_id.lower() + ".html")
                assert parsed.explanation
            else:
                assert parsed.gb_id is None and not parsed.explanation
            user = [f for f in parsed.frames if f.file.endswith("graph_breaks.py")]
            lines.append(user[-1].line if user else parsed.location.line)  # type: ignore[union-attr]
    assert lines == expected_breaks("graph_breaks.py")


@pytest.mark.parametrize("folder", SETS, ids=lambda p: p.name)
def test_resume_frames_name_the_line_they_resume_after(folder: Path) -> None:
    log = _log("graph_breaks.eager", folder)
    names = [c.metrics.co_name for c in log.ordered()]
    resumed = [int(m["line"]) for n in names if (m := RESUME.match(n))]
    assert resumed == expected_breaks("graph_breaks.py")
    assert frame_name(names[1]) == f"forward, after line {resumed[0]}"
    assert frame_name("forward") == "forward"


@pytest.mark.parametrize("folder", SETS, ids=lambda p: p.name)
def test_recompile_reason_is_a_size_guard_with_its_source(folder: Path) -> None:
    log = _log("batch_sweep.eager", folder)
    (reason,) = [r for c in log.ordered() for r in c.recompile_reasons]
    text = guard_text(reason)
    m = GUARD_SIZE.match(text)
    assert m, text
    assert (m["i"], m["a"], m["b"]) == ("0", "2", "4")
    assert source_name(m["n"]) in ("x", "args[0]")
    assert guard_pattern(text) == guard_pattern(text.replace("actual 4", "actual 8"))


@pytest.mark.parametrize("folder", trace_sets("bounded_dim"), ids=lambda p: p.name)
def test_a_dynamic_size_bounded_by_a_branch_is_a_range_guard(folder: Path) -> None:
    """tests/fixtures/jobs/bounded_dim.py: the third compile's guard on the dynamic graph
    is a range whose upper bound is the branch's constant less one."""
    from compilediag.analysis.recompiles.guard_words import translate
    from compilediag.analysis.recompiles.guards import parse_guard

    log = _log("bounded_dim", folder)
    texts = [parse_guard(r).guard for c in log.ordered() for r in c.recompile_reasons]
    ranges = [m for t in texts if (m := GUARD_RANGE.match(t))]
    assert [(m["src"], m["i"], m["lo"], m["hi"]) for m in ranges] == [("x", "1", "2", "9")]
    assert translate(ranges[0].group(0))[1] == "bounded"


def test_recompile_reasons_split_per_cached_graph() -> None:
    payload = (
        "0/0: tensor 'x' size mismatch at index 0. expected 2, actual 4\n0/1: 2 <= x.size()[0]"
    )
    assert split_recompile_reasons(payload) == [
        "0/0: tensor 'x' size mismatch at index 0. expected 2, actual 4",
        "0/1: 2 <= x.size()[0]",
    ]
    assert split_recompile_reasons(json.dumps(["a", "b"])) == ["a", "b"]


@pytest.mark.parametrize("folder", SETS, ids=lambda p: p.name)
def test_kernel_definitions_and_their_source(folder: Path) -> None:
    log = _log("transformer_block.inductor", folder)
    (c,) = log.ordered()
    (code,) = c.output_code
    names = [m["name"] for m in KERNEL_DEFINITION.finditer(code)]
    assert names and len(names) == code.count("= async_compile.")
    kernels = kernels_of_graph(str(c.id), code, node_lines(c.output_graph))
    generated = {k.kernel.name: k for k in kernels if k.kernel.kind != "extern"}
    assert set(generated) == set(names)
    for k in generated.values():
        # the source is the kernel's own text: C++ or a Triton function named after it
        assert ("@triton.jit" in k.source and f"def {k.kernel.name}(" in k.source) or (
            'extern "C"' in k.source or "void kernel(" in k.source
        ), k.kernel.name


def test_source_nodes_comment_names_aten_ops_on_triton() -> None:
    folder = next(p for p in SETS if "cuda" in p.name)
    (c,) = _log("transformer_block.inductor", folder).ordered()
    comments = list(SOURCE_NODES.finditer(c.output_code[0]))
    assert comments and all(m["aten"] for m in comments)


@pytest.mark.parametrize("folder", SETS, ids=lambda p: p.name)
def test_graph_comments_map_nodes_to_the_user_lines(folder: Path) -> None:
    (c,) = _log("transformer_block.inductor", folder).ordered()
    where = node_lines(c.output_graph)
    lines = {int(v.rsplit(":", 1)[1]) for v in where.values()}
    source = (SAMPLES / "transformer_block.py").read_text().splitlines()
    forward = next(i for i, s in enumerate(source, 1) if "def forward" in s)
    assert lines and all(forward < n <= len(source) for n in lines)


@pytest.mark.parametrize("folder", SETS, ids=lambda p: p.name)
def test_library_rules_on_recorded_stacks(folder: Path) -> None:
    c = _log("graph_breaks.eager", folder).ordered()[0]
    files = {f.file for f in c.stack}
    torch_files = [f for f in files if "/torch/" in f]
    assert torch_files and all(is_library_file(f) for f in torch_files)
    assert not is_library_file(str(SAMPLES / "graph_breaks.py"))
    assert not is_library_file("<string>")
    assert is_library_file("<frozen runpy>")


@pytest.mark.parametrize(
    "text",
    ["0/1", "!2/0/1", "0/1_2", "r3:0/1", "r1:!0/4/2_1"],
)
def test_compile_id_display_round_trips(text: str) -> None:
    assert str(CompileId.parse(text)) == text


def test_compile_id_parts_and_identity() -> None:
    cid = CompileId.parse("[r1:!0/4/2_1]")
    assert (cid.rank, cid.compiled_autograd, cid.frame, cid.frame_compile, cid.attempt) == (
        1, 0, 4, 2, 1,
    )  # fmt: skip
    assert cid.compile == CompileId.parse("r1:!0/4/2")
    assert cid.frame_key == CompileId.parse("r1:!0/4/0").frame_key
    assert not cid.is_first and CompileId.parse("3/0").is_first
    assert CompileId.parse("0/1#2") == CompileId.parse("0/1")  # a repeated id's display
    with pytest.raises(ValueError):
        CompileId.parse("forward")


@pytest.mark.parametrize("folder", SETS, ids=lambda p: p.name)
def test_metrics_seconds_and_microsecond_layouts_agree(folder: Path) -> None:
    """2.11+ write both layouts: read each alone, they must give the same times."""
    path = fixture_trace("transformer_block.inductor", folder)
    raw = [
        json.loads(line[line.index("{") :])["compilation_metrics"]
        for line in path.read_text().splitlines()
        if '{"compilation_metrics"' in line
    ]
    for m in raw:
        both = CompilationMetrics.parse(m)
        old = CompilationMetrics.parse({k: v for k, v in m.items() if not k.endswith("_time_s")})
        assert old.times_from == "cumulative_us" and both.times_from == "seconds"
        for field in ("entire_frame_s", "backend_s", "inductor_s", "codegen_s"):
            assert getattr(old, field) == pytest.approx(getattr(both, field), abs=1e-6)
        assert both.entire_frame_s > both.backend_s > both.inductor_s > 0


@pytest.mark.parametrize("folder", trace_sets("inductor_cache.cold"), ids=lambda p: p.name)
def test_a_cache_lookups_key_names_its_inputs_metadata_and_settings(folder: Path) -> None:
    """inductor_cache.cold: every FX-graph cache lookup is one of CACHE_RECORDS' artifacts;
    its key names each graph input (`example_inputs[i]`, a TensorMetadata with a shape and a
    dtype) and Inductor's settings (`inductor_config[name]`)."""
    from compilediag.analysis.diff.caches import cache_keys
    from compilediag.analysis.history import build_history

    log = _log("inductor_cache.cold", folder)
    keys = cache_keys(build_history([log]))
    records = [n for c in log.ordered() for n in CACHE_RECORDS for _ in c.json_artifacts(n)]
    assert keys and len(keys) == len(records)
    for key in keys:
        inputs = {n: v for n, v in key.values.items() if CACHE_INPUT.match(n)}
        assert inputs, sorted(key.values)[:5]
        for value in inputs.values():
            shape, dtype = TENSOR_META_SHAPE.search(value), TENSOR_META_DTYPE.search(value)
            assert shape and dtype and dtype[1] == "float32", value
        settings = [CACHE_CONFIG.match(n) for n in key.values]
        assert sum(m is not None for m in settings) > 10


@pytest.mark.parametrize("folder", trace_sets("inductor_cache.cold"), ids=lambda p: p.name)
def test_a_guard_trees_value_and_class_attribute_guards(folder: Path) -> None:
    """inductor_cache.cold compiles an nn.Sequential: its guard tree holds the module keys'
    values (`... == '0'`, without 2.6's padding) and the check that `forward` is the class's."""
    log = _log("inductor_cache.cold", folder)
    tree = log.ordered()[0].guards
    values = [m["v"] for m in GUARDS_EQUALS_MATCH.finditer(tree)]
    assert values[:2] == ["'0'", "'1'"], values
    contains = [m for line in tree.splitlines() if (m := GUARD_DICT_CONTAINS.search(line))]
    assert ("forward", "L['fn']") in [(m["attr"], m["src"]) for m in contains]
    assert guarded_chain("___check_obj_id(L['self'].config.problem_type, 1)") == (
        "self.config.problem_type"
    )
