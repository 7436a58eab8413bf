"""The README's commands say what the project does: its install line keeps the torch a venv
has, its Python matches the package's, its CI snippet only renders files an
earlier line made."""

from __future__ import annotations

import re
import tomllib

import pytest

from tests.conftest import ROOT

README = (ROOT / "README.md").read_text()


def _setup_block() -> str:
    return README.split("## Set-up", 1)[1].split("```bash", 1)[1].split("```", 1)[0]


def test_install_line_keeps_the_users_torch() -> None:
    """The install names no torch and no extra index: in a venv that has torch it installs
    none, and it never waits on an index that can't be reached. The package's torch has a
    floor and no ceiling, and CI installs the README's way beside a torch already there."""
    install = next(line for line in _setup_block().splitlines() if "pip install" in line)
    assert 'pip install -e ".[dev]"' in install
    assert "torch" not in install.split("pip install", 1)[1].split("&&", 1)[0]
    assert "index-url" not in install
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (torch,) = [d for d in deps if re.match(r"torch\b", d)]
    assert re.fullmatch(r"torch>=2\.6", torch), torch
    ci = (ROOT / ".ci" / "run").read_text()
    assert ci.count('pip install -q -e ".[dev]"') == 2 and "pip install --dry-run" in ci


def test_python_version_matches_the_package() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    floor = project["requires-python"].removeprefix(">=")
    assert f"Python ≥ {floor}" in README
    assert not re.search(r"Python ≥ 3\.(?!" + floor.split(".")[1] + r"\b)\d+", README)


def test_ci_snippet_renders_only_files_it_made() -> None:
    usage = (ROOT / "docs" / "usage.md").read_text()
    snippet = usage.split("## Using compilediag in CI", 1)[1].split("```bash", 1)[1]
    made: set[str] = set()
    for line in snippet.split("```", 1)[0].splitlines():
        command = line.split("#", 1)[0]
        for rendered in re.findall(r"compilediag render (\S+)", command):
            assert rendered in made, f"{rendered} is rendered before any line makes it"
        made.update(re.findall(r"(?:>|-o|--output|--junit|--html) (\S+)", command))


@pytest.mark.slow
@pytest.mark.full  # (100 s on 2 cores: the whole suite's)
def test_readme_samples_are_what_the_commands_print() -> None:
    """docs/samples.py made the README's sample outputs from real runs; run again, they say
    the same (numbers masked, the machine's timings left out) under the torch that made them."""
    samples = _load_samples()
    shown = samples.blocks(README)
    assert set(shown) == set(samples.SAMPLES)
    torch = pytest.importorskip("torch")
    for name in samples.SAMPLES:
        made = samples.made_with(shown[name])
        if not torch.__version__.startswith(made + "."):
            pytest.skip(f"the samples were made with torch {made}; this is {torch.__version__}")
        assert samples.comparable(samples.run(name)) == samples.comparable(shown[name]), name


def test_sample_comparison_masks_numbers_and_timings_only() -> None:
    samples = _load_samples()
    a = "torch 2.13.0+cpu\n4 graphs · compile 10.31 s\n 0/0  f   8.05 s\nTimings\n  eager 0.05 ms\nfix x\n"
    b = "torch 2.15.0+cu132\n4 graphs · compile 9.80 s\n 0/0  f  672 ms\nTimings\n  speedup 9x\n  more\nfix x\n"
    assert samples.comparable(a) == samples.comparable(b)
    assert samples.comparable(a) != samples.comparable(a.replace("fix x", "fix y"))
    # the headline's speed-up is measured too: marked unreliable on a busy machine, and
    # wrapped onto a line of its own, it reads the same
    quiet = "4 graphs · 4 kernels · compile 2.27 s · speedup 0.59x\nfix x\n"
    busy = "4 graphs · 4 kernels · compile 12.23 s\nspeedup 0.63x (unreliable)\nfix x\n"
    assert samples.comparable(quiet) == samples.comparable(busy)
    assert samples.comparable(quiet) != samples.comparable(busy.replace("kernels", "recompiles"))
    # which of the window's kernels cost most is this machine's too: the section is compared
    # by its title only
    window = "Kernels in the window (9 kernels, 0.1 ms a step)\n  aten::mm  0.01 ms\n\nfix x\n"
    other = window.replace("aten::mm", "cpp_fused_sum_0").replace("(9", "(8")
    assert samples.comparable(window) == samples.comparable(other)
    assert samples.comparable(window) != samples.comparable(window.replace("window", "graphs"))
    # a break's eager time is this machine's, and its width moves where the row wraps
    row = " 1. m.py:3\n     eager 0.07 ms a call (5%); removing the break saves that less\n"
    wider = row.replace("0.07 ms a call (5%); removing the break saves", "12.3 ms a call (95%);")
    after = "           the same code's compiled time\n       fix x\n"
    assert samples.comparable(row + after) == samples.comparable(wider + after)
    assert samples.comparable(row + after) != samples.comparable(row + after.replace("x", "y"))


def _load_samples():
    import importlib.util

    spec = importlib.util.spec_from_file_location("samples", ROOT / "docs" / "samples.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_notes_of_a_compiles_cost_are_this_machines_and_not_compared() -> None:
    """A note of what the compile cost follows this machine's caches (a cold cache says the
    portable cache), one of busy cores its load: left out of the comparison, as timings
    are; any other note is not."""
    samples = _load_samples()
    head = "compilediag · m.py\n1 graph · compile 3.1 s\n"
    other = "! 2 of 5 generated kernels name no user line: the\nrun had no records.\n"
    cost = (
        "! 9.28 s of the 11.29 s compile generated and compiled kernels, and every graph\n"
        "graph cache: paid again.\ntorch.compiler.save_cache_artifacts() carries them.\n"
    )
    tail = "\nGraph breaks (1 site)\n 1. m.py:3\n"
    plain = head + other + tail
    assert samples.comparable(head + other + cost + tail) == samples.comparable(plain)
    assert samples.comparable(head + cost + tail) != samples.comparable(plain)
    busy = "! timings not reliable: the cores were busy (load 2.0 beside\nthis run).\n"
    assert samples.comparable(head + other + busy + tail) == samples.comparable(plain)
