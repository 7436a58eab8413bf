"""The CLI surface with typer's CliRunner: help, version, usage errors, render."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from compilediag import __version__
from compilediag.analysis.build import build_report
from compilediag.cli.app import app
from compilediag.harness.worker_types import WorkerResult
from compilediag.report.model import TargetInfo
from compilediag.trace.parse import parse_path
from tests.conftest import fixture_trace

runner = CliRunner()


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"compilediag {__version__}"


@pytest.mark.parametrize("command", [[], ["explain"], ["render"]])
def test_every_command_has_help(command: list[str]) -> None:
    result = runner.invoke(app, [*command, "--help"])
    assert result.exit_code == 0
    assert "Usage" in result.output


def test_help_lists_exit_codes() -> None:
    result = runner.invoke(app, ["explain", "--help"], env={"COLUMNS": "200"})
    for code in (
        "0 ok",
        "1 gate failed",
        "2 usage error",
        "3 model failed",
        "4 torch.compile failed",
        "5 worker",
    ):
        assert code in " ".join(result.output.split())


def test_render_imports_neither_torch_nor_pydantic(saved_report: Path) -> None:
    """render is the fast path (< 0.25 s): typer's pydantic coercion is skipped for its
    string options, and the values still arrive as typed."""
    code = (
        "import sys, runpy; sys.argv = ['compilediag', 'render', sys.argv[1], '-f', 'csv', "
        "'-o', sys.argv[2]]\n"
        "try: runpy.run_module('compilediag', run_name='__main__')\n"
        "except SystemExit as e: print('exit', e.code)\n"
        "print('torch' in sys.modules, 'pydantic' in sys.modules)"
    )
    out_file = saved_report.with_suffix(".csv")
    out = subprocess.run(
        [sys.executable, "-c", code, str(saved_report), str(out_file)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert out.stdout.split("\n")[:2] == ["exit 0", "False False"], out.stderr
    assert out_file.read_text().startswith("kind,")


def test_help_imports_no_torch() -> None:
    code = "import sys; from compilediag.cli.app import app; print('torch' in sys.modules, 'pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False"


def test_bad_option_is_a_usage_error() -> None:
    result = runner.invoke(app, ["explain", "x.py", "--no-such-flag"])
    assert result.exit_code == 2


def test_missing_model_file_is_exit_2() -> None:
    result = runner.invoke(app, ["explain", "does/not/exist.py"])
    assert result.exit_code == 2
    assert "does not exist" in result.output


@pytest.fixture
def saved_report(tmp_path: Path) -> Path:
    report = build_report(
        parse_path(fixture_trace("graph_breaks.eager")),
        WorkerResult(),
        TargetInfo(path="sample_models/graph_breaks.py"),
    )
    p = tmp_path / "report.json"
    p.write_text(json.dumps(report.to_dict()))
    return p


@pytest.mark.parametrize("fmt", ["table", "json", "markdown"])
def test_render_saved_report(saved_report: Path, fmt: str) -> None:
    result = runner.invoke(app, ["render", str(saved_report), "--format", fmt])
    assert result.exit_code == 0, result.output
    assert "graph_breaks.py:24" in result.output or '"line": 24' in result.output


def test_render_json_round_trips(saved_report: Path) -> None:
    result = runner.invoke(app, ["render", str(saved_report), "--format", "json"])
    assert json.loads(result.output) == json.loads(saved_report.read_text())


def test_render_rejects_a_file_that_is_not_a_report(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"hello": 1}')
    result = runner.invoke(app, ["render", str(bad)])
    assert result.exit_code == 2
    assert "not a compilediag JSON report" in result.output
    result = runner.invoke(app, ["render", str(tmp_path / "missing.json")])
    assert result.exit_code == 2


def test_output_file_is_written_atomically(saved_report: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.md"
    result = runner.invoke(
        app, ["render", str(saved_report), "--format", "markdown", "-o", str(out)]
    )
    assert result.exit_code == 0
    assert out.read_text().startswith("## compilediag")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    result = runner.invoke(
        app, ["render", str(saved_report), "-o", str(tmp_path / "nope" / "r.md")]
    )
    assert result.exit_code == 2 and "does not exist" in result.output


def test_html_from_render_and_beside_a_report(saved_report: Path, tmp_path: Path) -> None:
    rendered = runner.invoke(app, ["render", str(saved_report), "--format", "html"])
    assert rendered.exit_code == 0, rendered.output
    assert rendered.output.startswith("<!DOCTYPE html>")
    page = tmp_path / "report.html"
    trace = str(fixture_trace("graph_breaks.eager"))
    result = runner.invoke(app, ["report", trace, "--format", "json", "--html", str(page)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)  # stdout stays the JSON report alone
    assert result.stderr == f"wrote {page} (the HTML report)\n"
    html = page.read_text()
    for b in data["graph_breaks"]:
        assert f"{Path(b['file']).name}:{b['line']}" in html


def test_help_shows_no_python_types_or_braces() -> None:
    for command in (["explain"], ["recompiles"], ["report"], ["dump-kernels"], ["render"]):
        text = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "100"}).output
        assert "<str>" not in text and "<list[" not in text and "{" not in text, command
        assert "-o, --out " not in text  # -o is --output, never --out
        # every option is named explicitly: typer 0.27 derived `--MODE` from a metavar
        assert not re.search(r"--[A-Z]", text), command


def test_each_run_option_is_declared_once() -> None:
    """A field of RunOptions is an option of every command that runs a model (but
    dump-kernels' --backend: it is Inductor's) and, where it says so, a config key."""
    import typing
    from dataclasses import fields

    from compilediag.cli.options import RUN_CONFIG_KEYS, RunOptions

    for command, without in (("explain", ()), ("recompiles", ()), ("dump-kernels", ("backend",))):
        text = runner.invoke(app, [command, "--help"], terminal_width=200).output
        for f in fields(RunOptions):
            if f.name in without or f.name == "target":
                continue
            flag = typing.get_args(f.metadata["cli"])[1].default.split("/")[
                0
            ]  # (typer keeps the first name there)
            assert flag in text, (command, flag)
        assert ("--backend" in text) == (command != "dump-kernels")
    assert RUN_CONFIG_KEYS == {
        "model": "target", "inputs": "inputs", "backend": "backend", "mode": "mode",
        "device": "device",
    }  # fmt: skip


def test_dump_kernels_table_starts_with_the_header_explain_has(tmp_path: Path) -> None:
    """Before: the table began at `torch ...`, with no `compilediag · FILE` line; a machine
    format's stdout stays the report alone."""
    from tests.conftest import run_cli

    model = "sample_models/clean_mlp.py"
    proc = run_cli("dump-kernels", model, "--out", str(tmp_path / "k"))
    assert proc.returncode == 0, proc.stderr
    first, second = proc.stdout.splitlines()[:2]
    assert first == f"compilediag · {model}  inputs: 8x32:float32"
    assert second.startswith("torch ")
    table = proc.stdout
    proc = run_cli("dump-kernels", model, "--out", str(tmp_path / "k"), "--force", "-f", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["target"]["path"] == model
    # kernels' lines without Inductor's records (matched by their ops, or none) are said so,
    # here and in the index, as explain says it (a twentieth look read none of it here)
    guessed = [
        n["message"] for n in json.loads(proc.stdout)["notes"] if n["kind"] == "no_provenance"
    ]
    assert guessed, "C++ kernels without Inductor's provenance records"
    assert " ".join(guessed[0].split()) in " ".join(table.split())
    assert guessed[0] in (tmp_path / "k" / "index.md").read_text()


def test_one_timed_block_is_timed_and_said_to_have_no_spread() -> None:
    """`--repeat 1` failed explain's timing ("StatisticsError: must have at least two data
    points"): one block is a median with no spread to give, said so."""
    from tests.conftest import run_cli

    proc = run_cli("explain", "sample_models/clean_mlp.py", "--backend", "eager", "--repeat", "1",
                   "--format", "json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert not [e for e in report["errors"] if "StatisticsError" in e["message"]], report["errors"]
    timings = report["timings"]
    assert timings["eager_ms"]["n"] == timings["compiled_ms"]["n"] == 1, timings
    table = run_cli("explain", "sample_models/clean_mlp.py", "--backend", "eager", "--repeat", "1")
    assert table.stdout.count("a call (1 timed block: no spread)") == 2, table.stdout
