"""The README's commands say what the project does: its install line takes the CPU build of
torch anywhere, its Python matches the package's, its CI snippet only renders files an
earlier line made."""

from __future__ import annotations

import re
import tomllib

from tests.conftest import ROOT

README = (ROOT / "README.md").read_text()


def _setup_block() -> str:
    return README.split("## Set-up", 1)[1].split("```bash", 1)[1].split("```", 1)[0]


def test_install_line_takes_the_cpu_build_from_pytorchs_index() -> None:
    install = next(line for line in _setup_block().splitlines() if "pip install" in line)
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in install
    assert re.search(r'"?torch==\d+\.\d+\.\d+\+cpu"?', install)
    ci = (ROOT / ".ci" / "run").read_text()
    assert "download.pytorch.org/whl/cpu" in ci and "+cpu" in ci


def test_python_version_matches_the_package() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    floor = project["requires-python"].removeprefix(">=")
    assert f"Python ≥ {floor}" in README
    assert not re.search(r"Python ≥ 3\.(?!" + floor.split(".")[1] + r"\b)\d+", README)


def test_ci_snippet_renders_only_files_it_made() -> None:
    snippet = README.split("## Using compilediag in CI", 1)[1].split("```bash", 1)[1]
    made: set[str] = set()
    for line in snippet.split("```", 1)[0].splitlines():
        command = line.split("#", 1)[0]
        for rendered in re.findall(r"compilediag render (\S+)", command):
            assert rendered in made, f"{rendered} is rendered before any line makes it"
        made.update(re.findall(r"(?:>|-o|--output|--junit|--html) (\S+)", command))
