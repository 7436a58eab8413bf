"""Words from data, read as a user reads them (#68): every report the recorded traces make
(each torch's, each device's), every saved report and the README's samples, checked for
text spliced wrong: torch's internal names (`___stack0`), a doubled word, an odd backtick,
an unbalanced bracket, a sentence that starts lowercase after a cut (after a number's
full stop too: `at line 14. where`), a word or a sentence cut mid-way, a raw value with no
unit, a plural after 1, a ratio past three significant figures (#76)."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from compilediag.analysis.ranks.fold import report_from_files
from compilediag.report.model import TargetInfo
from tests.conftest import ROOT, trace_sets

INTERNAL = re.compile(r"(?<![\w/])___\w")
DOUBLED = re.compile(r"\b([A-Za-z]{2,})\s+\1\b", re.I)
# a sentence's first word after a full stop: lowercase only where it is a name (torch, a
# file, code: said so by design) or follows an abbreviation (e.g. x)
AFTER_STOP = re.compile(r"(?<!\be\.g\.)(?<!\bi\.e\.)(?<!\betc\.)(?<=\w[.!?])\s+([a-z][^\s,;:)]*)")
# a word cut mid-way (`not known to be a Te)`), a text cut after its colon or bracket
CUT = re.compile(r"(?<![\w=.'\"])[A-Z][a-z]\)|[:(,]\s*$")
# a raw value printed as computed (`1.23737 (at most 0.5)`): a number of 4 decimals or more
# with no unit after it; not a value of the user's program, as torch gives it (`was 0.0625`,
# `was 0.125, then 0.0625`)
UNITLESS = re.compile(
    r"(?<![\w.])(?<!was )(?<!then )(?<!tensor\()\d+\.\d{4,}(?![\d%×])(?!\s*(?:ms|s|GB|MB|TB|TFLOP|x)\b)"
)
# a count of one with a plural noun (`1 tasks`, `blocks of 1 calls`, `run 1 times`)
ONE_PLURAL = re.compile(
    r"(?<![\d.])(?<!rank )1 (?:tasks|calls|times|rounds|runs|pairs|steps|graphs|recompiles|ranks|values|"
    r"kernels|breaks|frames|processes|requests|shapes|lines|more pairs)\b"
)
# a ratio past three significant figures (`25.58×`, `142.3×`)
LONG_RATIO = re.compile(r"(?<![\d.])(?:\d{2}\.\d{2,}|\d{3,}\.\d+)×")
# what a report holds that is code, a path or torch's own text, not its words
NOT_WORDS = {
    "code", "context", "guards", "reasons", "command", "stack", "source", "guard", "file",
    "path", "text", "repro", "explanation", "hints", "reason", "guard_code", "function",
    "frame", "name", "shapes", "doc_url", "failed_guards", "compile_id", "graph",
}  # fmt: skip


def problems(text: str) -> list[str]:
    out = []
    if m := INTERNAL.search(text):
        out.append(f"torch's internal name: {text[max(0, m.start() - 30) : m.end() + 20]!r}")
    if m := DOUBLED.search(text):
        out.append(f"a doubled word: {m[0]!r}")
    if text.count("`") % 2:
        out.append("an odd backtick")
    for a, b in ("()", "[]"):
        if text.count(a) != text.count(b):
            out.append(f"unbalanced {a}{b}")
    if m := CUT.search(text):
        out.append(f"cut mid-way: {text[max(0, m.start() - 30) : m.end()]!r}")
    if m := ONE_PLURAL.search(text):
        out.append(f"a plural after 1: {m[0]!r}")
    if m := LONG_RATIO.search(text):
        out.append(f"a ratio past 3 significant figures: {m[0]!r}")
    if m := UNITLESS.search(text):
        out.append(f"a value with no unit: {text[max(0, m.start() - 30) : m.end() + 10]!r}")
    for m in AFTER_STOP.finditer(text):
        word = m[1]
        if not word.startswith("torch") and not re.search(r"[./_`(\d]", word):
            out.append(f"lowercase after a stop: {text[max(0, m.start() - 30) : m.end()]!r}")
    return out


def prose(x: object, key: str = "") -> Iterator[tuple[str, str]]:
    """(where, text) for each of a report's strings that are its own words."""
    if isinstance(x, str):
        if key not in NOT_WORDS and " " in x and len(x) >= 20:
            yield key, x
    elif isinstance(x, dict):
        for k, v in x.items():
            yield from prose(v, k)
    elif isinstance(x, list):
        for v in x:
            yield from prose(v, key)


def _recordings() -> list[Path]:
    found = []
    for folder in trace_sets():
        for p in sorted(folder.iterdir()):
            if p.is_dir() and any(p.glob("*.log*")) or p.name.endswith((".log", ".log.gz")):
                found.append(p)
    return found


def test_the_checks_find_what_they_look_for() -> None:
    """Each check fails on the text it is for, and passes a plain sentence."""
    assert problems("the `___stack0[0]` changed") and problems("losses losses part from eager")
    assert problems("mark it (`x, 0)") and problems("the op takes a tensor. where it is")
    assert problems("not known to be a Te)") and problems("(under the Trainer or accelerate:")
    assert problems("1.23737 (at most 0.5)")
    assert (
        problems("1 tasks running") and problems("blocks of 1 calls") and problems("25.58× faster")
    )
    assert not problems("11 tasks, 21 calls and 1.96× faster; 142× in 0.1 steps")
    assert not problems("only rank 1 breaks at x.py:3; rank 1 recompiles for forward")
    assert not problems("It ran. torch made it dynamic (x.py:3). e.g. a batch")
    assert not problems("DataLoader(..., num_workers=N) took 0.1234 ms, 1.23737 s (at most 5 s)")


def test_every_report_the_recordings_make_reads_right() -> None:
    bad = []
    for p in _recordings():
        paths = sorted(p.glob("*.log*")) if p.is_dir() else [p]
        report = report_from_files(paths, TargetInfo(path=str(p)))
        for key, text in prose(json.loads(json.dumps(dataclasses.asdict(report), default=str))):
            bad += [f"{p.parent.name}/{p.name} {key}: {x}" for x in problems(text)]
    assert not bad, "\n".join(bad[:20])


@pytest.mark.parametrize("path", sorted((ROOT / "tests/fixtures/reports").glob("*.json")))
def test_every_saved_report_reads_right(path: Path) -> None:
    bad = [f"{k}: {x}" for k, t in prose(json.loads(path.read_text())) for x in problems(t)]
    assert not bad, "\n".join(bad[:20])


def test_the_readmes_samples_read_right() -> None:
    """The samples of what compilediag prints (not the shell and Python blocks), line by
    line as the terminal wraps them: internal names and doubled words."""
    text = (ROOT / "README.md").read_text()
    bad = []
    for block in re.findall(r"```\n(.*?)```", text, re.S):
        for line in block.splitlines():
            bad += [
                f"{line.strip()!r}: {x}"
                for x in problems(line)
                if "internal" in x or "doubled" in x
            ]
    assert not bad, "\n".join(bad[:20])


def test_a_cost_that_is_not_zero_is_never_said_as_zero_percent() -> None:
    """Before: "costs 0.392 ms a step in eager code (0% of the step)"."""
    from compilediag.report.words import percent

    assert (percent(0.00279), percent(0.0), percent(0.005), percent(0.23)) == (
        "<1%",
        "0%",
        "<1%",
        "23%",
    )
