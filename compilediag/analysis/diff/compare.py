"""Two runs side by side (`compilediag diff A B`): what each was, breaks, recompiles,
graphs, kernels, compile time, caches, timings; and for each FX-graph cache miss in B
whose graph A compiled too, the cache key's components that differ, in words.

A side is a trace (a folder or file, every rank's) or a saved report. The cache keys'
components are in the trace only (each `fx_graph_cache_hit`/`miss` record lists them, each
with its own hash); a saved report gives the rest. The types are in `diff_model.py`, the
caches in `diff_caches.py`, the timings in `diff_timings.py`."""

from __future__ import annotations

import os

from compilediag.analysis.diff.caches import cache_changes
from compilediag.analysis.diff.model import Change, ChangeKind, Diff, RunInfo, Side, graph_place
from compilediag.analysis.diff.timings import timing_changes
from compilediag.report.model import GraphBreak, Recompile, Report
from compilediag.report.words import times

DIFF_KIND = "compilediag diff"
DIFF_VERSION = 1


def run_info(side: Side) -> RunInfo:
    r, env = side.report, side.report.environment
    job = r.runtime
    what = " ".join(job.command) if job is not None and job.command else r.target.path
    return RunInfo(
        path=side.path, what=what, torch=env.torch, python=env.python,
        device=env.device_name or env.device, backend=env.backend,
        source="trace" if side.caches is not None else "saved report",
        ranks=max(1, len(r.ranks)),
    )  # fmt: skip


def diff(a: Side, b: Side, tolerance: float = 0.2) -> Diff:
    d = Diff(DIFF_KIND, DIFF_VERSION, run_info(a), run_info(b), tolerance=tolerance)
    if _program(a.report) != _program(b.report):
        d.notes.append(
            f"A and B ran different programs ({_program(a.report) or '?'} and "
            f"{_program(b.report) or '?'}): what matches is compared"
        )
    d.breaks = break_changes(a.report, b.report)
    d.recompiles = recompile_changes(a.report, b.report)
    d.graphs = graph_changes(a.report, b.report)
    d.compile_time = compile_time_changes(a.report, b.report, tolerance)
    d.caches, d.misses = cache_changes(a, b)
    d.timings = timing_changes(a.report, b.report, tolerance)
    return d


def _program(r: Report) -> str:
    job = r.runtime
    if job is not None and job.command:
        return os.path.basename(next((x for x in job.command if x.endswith(".py")), job.command[0]))
    files = {os.path.basename(g.file) for g in r.graphs if g.file}
    return ", ".join(sorted(files)) or os.path.basename(r.target.path)


# -- breaks and recompiles ---------------------------------------------------------------


def site_key(b: GraphBreak) -> tuple[str, str, str]:
    """A break site across runs: its file, its line's code and torch's reason (not the
    line number, which an edit above it moves)."""
    return os.path.basename(b.file), b.code.strip(), b.reason


def guard_key(r: Recompile) -> tuple[str, str, str, str]:
    """A recompile across runs: its frame, its file, and the guard torch stated (numbers
    blanked: x == 0.7 and x == 1.0 are one reason; the source comment torch appends, with
    the file's path, left out), never compilediag's words for it, so a baseline survives a
    rewording of the advice."""
    from compilediag.trace.formats import guard_pattern

    guard = r.reasons[0] if r.reasons else r.failed_guard
    return os.path.basename(r.file), r.frame, r.cause, guard_pattern(guard.split("  #")[0].strip())


def break_changes(a: Report, b: Report) -> list[Change]:
    old = {site_key(x): x for x in a.graph_breaks}
    now = {site_key(x): x for x in b.graph_breaks}
    out = []
    by_code_a = {(os.path.basename(x.file), x.code.strip()): x for x in a.graph_breaks}
    for key, x in now.items():
        where = f"{os.path.basename(x.file)}:{x.line}"
        if key in old:
            y = old[key]
            if y.line != x.line:
                out.append(Change(ChangeKind.MOVED, f"moved: {x.code.strip()} ({x.reason}) from line "
                                  f"{y.line} to {x.line}"))  # fmt: skip
            if (y.gb_id or "") != (x.gb_id or ""):
                out.append(Change(ChangeKind.CHANGED, f"{where} {x.code.strip()}: torch's id for it "
                                  f"changed, {y.gb_id or 'none'} → {x.gb_id or 'none'}"
                                  + _release_words(y.gb_id, x.gb_id)))  # fmt: skip
            continue
        same_line = by_code_a.get(key[:2])
        if same_line is not None:  # the same line breaks for another reason now
            out.append(Change(
                ChangeKind.CHANGED, f"{where} {x.code.strip()}: its reason changed, "
                f"{same_line.reason} ({same_line.gb_id or '-'}) → {x.reason} ({x.gb_id or '-'})"
                + _release_words(same_line.gb_id, x.gb_id),
            ))  # fmt: skip
            continue
        out.append(Change(ChangeKind.NEW, f"new break at {where}: {x.code.strip()} ({x.reason}"
                          f"{', ' + x.gb_id if x.gb_id else ''})", regression=True,
                          file=x.file, line=x.line))  # fmt: skip
    by_code_b = {(os.path.basename(x.file), x.code.strip()) for x in b.graph_breaks}
    for key, y in old.items():
        if key not in now and key[:2] not in by_code_b:
            out.append(Change(ChangeKind.GONE, f"break gone: {os.path.basename(y.file)}:{y.line} "
                              f"{y.code.strip()} ({y.reason})"))  # fmt: skip
    return out


def _release_words(old: str | None, new: str | None) -> str:
    from compilediag.trace.releases import id_change

    said = id_change(old, new)
    return f" ({said})" if said else ""


def recompile_changes(a: Report, b: Report) -> list[Change]:
    old = {guard_key(r): r for r in a.recompiles}
    now = {guard_key(r): r for r in b.recompiles}
    out = [
        Change(ChangeKind.NEW, f"new recompile of {r.frame}: {r.failed_guard}", regression=True,
               file=r.file, line=r.line)
        for k, r in now.items() if k not in old
    ]  # fmt: skip
    out += [
        Change(ChangeKind.GONE, f"recompile gone: {r.frame}: {r.failed_guard}")
        for k, r in old.items() if k not in now
    ]  # fmt: skip
    if len(a.recompiles) != len(b.recompiles) and not out:
        out.append(Change(ChangeKind.CHANGED, f"recompiles: {len(a.recompiles)} → {len(b.recompiles)}, "
                          "for the same guards"))  # fmt: skip
    fails_a = {(f.frame, f.fail_type) for f in a.compile_failures}
    for f in b.compile_failures:
        if (f.frame, f.fail_type) not in fails_a:
            out.append(Change(ChangeKind.NEW, f"new compile failure in {f.frame}: {f.fail_type}: "
                              f"{f.reason}", regression=True))  # fmt: skip
    return out


# -- graphs, kernels, compile time --------------------------------------------------------


def _first_rank(r: Report) -> list:
    """One rank's graphs (the first group's, as a folded report lists them)."""
    ranks = {g.compile_id.split(":")[0] for g in r.graphs if ":" in g.compile_id}
    if not ranks:
        return list(r.graphs)
    first = sorted(ranks)[0]
    return [g for g in r.graphs if g.compile_id.startswith(first + ":")]


def graph_changes(a: Report, b: Report) -> list[Change]:
    ga, gb = _first_rank(a), _first_rank(b)
    old = {graph_place(g): g for g in ga}
    now = {graph_place(g): g for g in gb}
    kernels_a = _kernels_by_graph(a)
    kernels_b = _kernels_by_graph(b)
    out = []
    for place, g in now.items():
        where = f"{g.frame} ({place[1]}:{g.line}), compile {place[3] or 0}"
        if place not in old:
            out.append(Change(ChangeKind.NEW, f"new graph: {where}, {g.ops} ops"))
            continue
        h = old[place]
        if h.ops != g.ops:
            out.append(Change(ChangeKind.CHANGED, f"{where}: {h.ops} → {g.ops} ops"))
        ka, kb = kernels_a.get(graph_place(h), []), kernels_b.get(place, [])
        if len(ka) != len(kb):
            out.append(Change(ChangeKind.CHANGED, f"{where}: {len(ka)} → {len(kb)} kernels"))
        fallbacks = sorted(set(kb) - set(ka))
        if fallbacks and ka:
            out.append(
                Change(ChangeKind.CHANGED, f"{where}: new library calls {', '.join(fallbacks)}")
            )
    for place, h in old.items():
        if place not in now:
            out.append(Change(ChangeKind.GONE, f"graph gone: {h.frame} ({place[1]}:{h.line}), compile "
                              f"{place[3] or 0}"))  # fmt: skip
    if len(ga) != len(gb):
        out.insert(0, Change(ChangeKind.CHANGED, f"graphs: {len(ga)} → {len(gb)}"))
    return out


def _kernels_by_graph(r: Report) -> dict[tuple, list[str]]:
    """A graph's kernels: the generated ones by kind, library calls by name."""
    places = {g.compile_id: graph_place(g) for g in _first_rank(r)}
    out: dict[tuple, list[str]] = {}
    for k in r.kernels:
        place = places.get(k.compile_id)
        if place is not None:
            label = k.name if str(k.kind) in ("extern", "library") else str(k.kind)
            out.setdefault(place, []).append(label)
    return out


PHASES = (("dynamo_s", "dynamo"), ("aot_s", "aot"), ("inductor_s", "inductor"),
          ("codegen_s", "codegen"), ("backward_s", "backward"))  # fmt: skip


def compile_time_changes(a: Report, b: Report, tolerance: float) -> list[Change]:
    ca, cb = a.compile_time, b.compile_time
    if ca is None or cb is None or not ca.total_s or not cb.total_s:
        return []
    ratio = cb.total_s / ca.total_s
    phases = " · ".join(
        f"{name} {getattr(ca, attr):.2f} → {getattr(cb, attr):.2f} s"
        for attr, name in PHASES if getattr(ca, attr) or getattr(cb, attr)
    )  # fmt: skip
    worse = ratio > 1 + tolerance and cb.total_s - ca.total_s > 0.5
    kind = ChangeKind.SAME if abs(ratio - 1) <= tolerance else ChangeKind.CHANGED
    return [Change(kind, f"{ca.total_s:.2f} → {cb.total_s:.2f} s ({times(ratio)}): {phases}",
                   regression=worse)]  # fmt: skip
