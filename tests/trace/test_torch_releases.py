"""Every torch release from 2.6 to 2.15: which torch made a trace, records that carry no
rank or compile id, GB ids through every name a break type has had, and advice that names
only what the running torch has. CI runs this suite on 2.13 and on 2.15."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from compilediag.analysis.notes import untested_torch
from compilediag.fixes import fix_for, registry, table
from compilediag.report.model import Environment
from compilediag.trace.releases import (
    NEWEST_TESTED,
    installed,
    nonstrict_trace,
    release,
    untested_notice,
)
from tests.conftest import TRACES, run_json, trace_sets


def test_release_of_every_version_text() -> None:
    assert release("2.15.0+cu132") == (2, 15)
    assert release("2.6.0") == (2, 6)
    assert release("2.16.0.dev20261101+cpu") == (2, 16)
    assert release("(version not in the trace)") is None


def test_a_torch_past_the_tested_range_gets_one_notice_not_an_error() -> None:
    newer = f"{NEWEST_TESTED[0]}.{NEWEST_TESTED[1] + 1}.0"
    notice = untested_notice(newer)
    assert notice is not None and "\n" not in notice
    assert newer in notice and "2.6 to {}.{}".format(*NEWEST_TESTED) in notice
    assert untested_notice("2.5.1") is not None
    for tested in ("2.6.0", "2.13.0+cpu", "2.15.0+cu132"):
        assert untested_notice(tested) is None
    # a trace with two torches: one notice for the one outside the range
    assert [n.message for n in untested_torch(Environment(torch=f"2.13.0+cpu, {newer}"))] == [
        notice
    ]


def test_the_installed_torch_is_read_without_importing_it() -> None:
    torch = pytest.importorskip("torch")
    # the metadata's version has no local part on PyPI's builds (2.15.0 for 2.15.0+cu132)
    assert torch.__version__.startswith(installed().split("+")[0]) and installed()
    assert release(installed()) == release(torch.__version__)
    assert untested_notice(installed()) is None, "CI runs every torch it installs in range"


# --- which torch made a trace ------------------------------------------------------------

RECORDED = [p for p in trace_sets() if (p / "manifest.json").exists()]


@pytest.mark.parametrize("folder", RECORDED, ids=lambda p: p.name)
def test_report_names_the_torch_that_wrote_the_trace(folder: Path) -> None:
    """From the trace's `torch_version` record (2.8+) or its metrics, never the torch that
    reads it: the manifest says which torch each recording was made with."""
    manifest = json.loads((folder / "manifest.json").read_text())
    name, entry = next((n, e) for n, e in sorted(manifest.items()) if e.get("ranks", 1) == 1)
    path = folder / (entry["files"][0] if "files" in entry else f"{name}.log")
    text = path.read_text()
    report, _ = run_json("report", str(path))
    if '"name": "torch_version"' in text or '"pytorch_version"' in text:
        assert report["environment"]["torch"] == entry["torch"]
    else:  # 2.6 writes neither
        assert report["environment"]["torch"] == "(version not in the trace)"


# --- records with no rank and no compile id ------------------------------------------------


def _headers(path: Path) -> list[dict]:
    return [
        json.loads(line[line.index("{") :])
        for line in path.read_text().splitlines()
        if not line.startswith("\t") and "{" in line
    ]


@pytest.mark.parametrize(
    "folder", trace_sets("compile_worker_status"), ids=lambda p: p.name
)  # fmt: skip
def test_compile_worker_status_records_are_counted_not_misfiled(folder: Path) -> None:
    path = folder / "compile_worker_status.log"
    headers = _headers(path)
    status = [h for h in headers if h.get("artifact", {}).get("name") == "compile_worker_status"]
    assert status, "the recording holds the pool's status records"
    assert all("rank" not in h and "frame_id" not in h for h in status)
    compiled = {
        h["compilation_metrics"]["compile_id"] for h in headers if "compilation_metrics" in h
    }
    report, proc = run_json("report", str(path))
    assert proc.returncode == 0, proc.stderr
    counted = {k: v for k, v in report["trace"]["not_analysed"].items() if "compile_worker" in k}
    assert sum(counted.values()) == len(status), counted
    assert report["trace"]["unknown_records"] == {}
    # nothing became a compile of its own: the graphs are the compiles torch measured
    assert {g["compile_id"] for g in report["graphs"]} == compiled
    assert report["summary"]["graphs"] == len(compiled)
    assert report["ranks"] == []


# --- GB ids through every name a break type has had -----------------------------------------


def _renamed() -> list[tuple[str, str]]:
    """(GB id, name) for every id the installed registry lists under several gb_types
    (newest name first, older names after)."""
    out = []
    for gb_id, entries in sorted(registry().items()):
        names = list(dict.fromkeys(e.gb_type for e in entries))
        if len(names) > 1:
            out += [(gb_id, n) for n in names]
    return out


@pytest.mark.parametrize(("gb_id", "name"), _renamed())
def test_every_name_of_a_break_type_finds_its_gb_id(gb_id: str, name: str) -> None:
    fix = fix_for(None, name)
    assert fix.gb_id == gb_id or (fix.gb_id and name in _types_of(fix.gb_id)), (name, fix)


def _types_of(gb_id: str) -> set[str]:
    return {e.gb_type for e in registry()[gb_id]}


def test_the_types_renamed_in_2_14_keep_their_ids() -> None:
    """2.14 renamed three break types (`str_impl not implemented` -> `tp_str_impl ...`);
    a break text with the 2.13 name, read by a newer torch, gets the same GB id."""
    torch = pytest.importorskip("torch")
    if release(torch.__version__) < (2, 14):  # type: ignore[operator]
        pytest.skip("the 2.14 names are in the registry of 2.14 and later")
    renames = {
        "GB2483": ("tp_str_impl not implemented", "str_impl not implemented"),
        "GB6053": ("tp_repr_impl not implemented", "repr_impl not implemented"),
        "GB9648": ("Missing tp_richcompare_impl override", "Missing richcompare_impl override"),
    }
    for gb_id, (new, old) in renames.items():
        assert [e.gb_type for e in registry()[gb_id]][:2] == [new, old]
        assert fix_for(None, new).gb_id == gb_id
        assert fix_for(None, old).gb_id == gb_id


# --- advice names only what the running torch has --------------------------------------------

API = re.compile(r"@?(torch(?:\.[A-Za-z_]\w*)+)")


def _resolves(torch, dotted: str) -> bool:
    import importlib

    parts = dotted.split(".")
    obj = torch
    for i, part in enumerate(parts[1:], 1):
        if hasattr(obj, part):
            obj = getattr(obj, part)
            continue
        try:
            obj = importlib.import_module(".".join(parts[: i + 1]))
        except ImportError:
            return False
    return True


def _advice_texts(version: str, ours_only: bool = False) -> list[str]:
    """Every fix text for the registry of the running torch (compilediag's own only, with
    `ours_only`), and the one that depends on the release: a C-extension call."""
    texts = [f.text for f in table().values() if f.specific or not ours_only]
    texts.append(
        fix_for(
            "GB0007", "Attempted to call function marked as skipped",
            "Dynamo does not know how to trace the Python builtin `mylib._C.fast_op`.",
            torch_version=version,
        ).text
    )  # fmt: skip
    return texts


def test_every_api_the_advice_names_exists_in_the_running_torch() -> None:
    torch = pytest.importorskip("torch")
    named = {
        m.group(1).rstrip(".") for t in _advice_texts(torch.__version__) for m in API.finditer(t)
    }
    # torch's own hints name modules and functions too; only a name torch itself writes
    # may be missing (a hint about a config of another build)
    missing = sorted(n for n in named if not _resolves(torch, n))
    ours = [n for n in missing if any(n in t for t in _advice_texts(torch.__version__, True))]
    assert named and not ours, ours


@pytest.mark.parametrize(
    ("version", "decorator"),
    [
        ("2.15.0+cu132", "torch.compiler.nonstrict_trace"),
        ("2.14.1", "torch.compiler.nonstrict_trace"),
        ("2.13.0+cpu", "torch._dynamo.nonstrict_trace"),
        ("2.7.1", "torch._dynamo.nonstrict_trace"),
        ("2.6.0", "torch.compiler.allow_in_graph"),
    ],
)
def test_a_c_extension_call_gets_the_decorator_its_torch_has(version: str, decorator: str) -> None:
    (text,) = [t for t in _advice_texts(version) if "mylib._C.fast_op" in t]
    assert f"@{decorator}." in text
    others = {"torch.compiler.nonstrict_trace", "torch._dynamo.nonstrict_trace"} - {decorator}
    assert not any(o in text for o in others)


def test_the_advised_decorator_keeps_an_untraceable_call_in_one_graph() -> None:
    """The decorator the advice names for the running torch, applied: a helper Dynamo
    breaks on (it calls graph_break) no longer splits the graph."""
    torch = pytest.importorskip("torch")
    name = nonstrict_trace(torch.__version__)
    if name is None:
        pytest.skip("torch before 2.7 has no nonstrict_trace")
    decorator = torch
    for part in name.split(".")[1:]:
        decorator = getattr(decorator, part)

    def helper(t):
        torch._dynamo.graph_break()
        return t * 2

    def fn(x):
        return helper(x + 1).relu()

    torch._dynamo.reset()
    before = torch._dynamo.explain(fn)(torch.randn(4))
    torch._dynamo.reset()
    wrapped = decorator(helper)

    def fixed(x):
        return wrapped(x + 1).relu()

    after = torch._dynamo.explain(fixed)(torch.randn(4))
    torch._dynamo.reset()
    assert before.graph_break_count >= 1
    assert after.graph_break_count == 0 and after.graph_count == 1
    assert torch.equal(fixed(torch.ones(4)), fn(torch.ones(4)))


def test_recorded_versions_cover_the_tested_range() -> None:
    releases = {release(p.name.split("-")[1]) for p in trace_sets()}
    assert (2, 6) in releases and NEWEST_TESTED in releases and (2, 14) in releases
    assert all((TRACES / p.name / "manifest.json").exists() for p in trace_sets())


# --- the same findings on every release ------------------------------------------------------

BASE = TRACES / "torch-2.13.0-cpu"
VIEWS = {"aten.view", "aten._unsafe_view", "aten.reshape"}  # 2.15 writes _unsafe_view


def _findings(path: Path) -> dict:
    """What a report finds, without what a release may word or number differently."""
    from compilediag.analysis.ranks.fold import report_from_traces
    from compilediag.report.model import TargetInfo
    from compilediag.trace.parse import parse_path

    r = report_from_traces(parse_path(path), TargetInfo(path=str(path)))
    return {
        "graphs": r.summary.graphs,
        "breaks": sorted((Path(b.file).name, b.line, b.cause, b.count) for b in r.graph_breaks),
        "recompiles": sorted((x.frame, x.cause, x.failed_guard) for x in r.recompiles),
        "limit hits": len(r.recompile_limit_hits),
        "failures": sorted((f.by, Path(f.file).name, f.line) for f in r.compile_failures),
        "kernels": sorted((k.kind, tuple(sorted(set(k.ops) - VIEWS))) for k in r.kernels),
        "divergence": len(r.divergence),
    }


# recordings made to differ between releases (tests/analysis/diff/test_diff.py reads them as a pair)
DIFFER = {"release_changes.log"}
NEWER = [
    (folder, p.name)
    for folder in trace_sets()
    if release(folder.name.split("-")[1]) > (2, 13)  # type: ignore[operator]
    for p in sorted(BASE.iterdir())
    if p.name not in ("manifest.json", *DIFFER) and (folder / p.name).exists()
]


@pytest.mark.parametrize(("folder", "name"), NEWER, ids=lambda x: getattr(x, "name", x))
def test_a_newer_torch_finds_what_2_13_found(folder: Path, name: str) -> None:
    """Each recording (sample models through explain's worker, recompile sweeps, Inductor's
    kernels, user jobs, ranks) made again with a newer torch: the same breaks, recompiles,
    failures, kernels and rank divergences as on 2.13."""
    assert _findings(folder / name) == _findings(BASE / name)
