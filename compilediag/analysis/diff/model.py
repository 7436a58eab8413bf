"""What `compilediag diff` compares and gives (analysis/diff/compare.py builds it): one run's
side, what each run was, a change in words, a cache miss's causes, the whole Diff; and a
graph's place, by which the two runs' graphs (and their cache lookups) are matched."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from enum import StrEnum

from compilediag.report.model import CacheKey, Graph, Report


@dataclass
class Side:
    """One run: its report, where it came from, and its cache lookups (a trace's only)."""

    label: str  # A or B
    path: str
    report: Report
    caches: list[CacheKey] | None = None  # None: a saved report (no cache records)


@dataclass
class RunInfo:
    path: str
    what: str  # the command or the model
    torch: str
    python: str
    device: str
    backend: str
    source: str  # trace or report
    ranks: int = 1


class ChangeKind(StrEnum):
    """What a difference between A and B is."""

    NEW = "new"  # in B only
    GONE = "gone"  # in A only
    MOVED = "moved"  # the same finding at another line
    CHANGED = "changed"  # past the tolerance (a timing), or another reason
    SAME = "same"  # within the tolerance or the spread: said, so no one reads it as missing
    NOTE = "note"  # not compared, and why (a run timed with its cores busy)


@dataclass
class Change:
    """One difference, in words; `kind` says which."""

    kind: ChangeKind
    text: str
    regression: bool = False
    file: str = ""  # B's site, where the change has one (a new break, a new recompile)
    line: int = 0


@dataclass
class CacheMiss:
    """A miss in B of a graph A looked up too: why, component by component."""

    graph: str  # B's compile id and place
    a_status: str
    causes: list[str] = field(default_factory=list)
    # which of the graph's compiles missed, where it has a backward: "forward" or "backward"
    # (both are looked up under the frame's one compile id); "" for a graph with no backward
    part: str = ""


@dataclass
class Diff:
    kind: str
    version: int
    a: RunInfo
    b: RunInfo
    breaks: list[Change] = field(default_factory=list)
    recompiles: list[Change] = field(default_factory=list)
    graphs: list[Change] = field(default_factory=list)
    compile_time: list[Change] = field(default_factory=list)
    caches: list[Change] = field(default_factory=list)
    misses: list[CacheMiss] = field(default_factory=list)
    timings: list[Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    tolerance: float = 0.2

    @property
    def regressions(self) -> list[Change]:
        return [c for part in self.parts() for c in part[1] if c.regression]

    @property
    def regressed(self) -> bool:
        return bool(self.regressions)

    def parts(self) -> list[tuple[str, list[Change]]]:
        return [
            ("Graph breaks", self.breaks), ("Recompiles", self.recompiles),
            ("Graphs and kernels", self.graphs), ("Compile time", self.compile_time),
            ("Caches", self.caches), ("Timings", self.timings),
        ]  # fmt: skip


def graph_place(g: Graph) -> tuple[str, str, int, str]:
    """A graph across runs: its frame, file, line, and which compile of the frame it is."""
    cid = g.compile_id.split(":")[-1].split("#")[0]
    return g.frame, os.path.basename(g.file), g.line, cid.partition("/")[2]
