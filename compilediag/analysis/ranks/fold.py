"""A job's ranks, folded. Each rank's trace is reduced to a digest - its own Report and
summary - as soon as it is read (in parallel, one file per process at a time, so memory is
bounded by the largest rank, not the sum); ranks whose findings are alike form a group, and
one Report is built in which each finding names the ranks that have it."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING

from compilediag.analysis.recompiles.recompiles import changed_subjects
from compilediag.report.model import (
    VERSION,
    CacheKey,
    CompileTime,
    Environment,
    RankGraph,
    RankGroup,
    RankSummary,
    Report,
    Summary,
    TargetInfo,
    TraceInfo,
    job_summary,
)
from compilediag.report.ranksets import rank_set
from compilediag.report.vocabulary import Finding, FindingKind, Source
from compilediag.trace.compiles import TraceLog, unranked

if TYPE_CHECKING:
    from compilediag.analysis.history import History
    from compilediag.analysis.step.runtime import JobRun


@dataclass
class RankDigest:
    """One rank's trace, reduced: its findings and its summary (no payloads)."""

    report: Report | None  # None in a saved file: an earlier digest with its key has it
    summary: RankSummary
    versions: list[str]
    records: int  # 0: not a trace (an empty file, an unrelated one)
    cudagraph_skips: list[str]  # why graphs ran without a CUDA graph (the trace's reasons)
    key: str = ""  # what ranks that compiled alike share (fingerprint)
    cache_keys: list[CacheKey] = field(default_factory=list)  # its FX-graph cache lookups
    # graphs its trace shows made for evaluation (mode_graphs): without `run`'s facts
    evaluation: list[str] = field(default_factory=list)


DIGEST_KIND = "compilediag rank digests"
DIGEST_VERSION = 1


@dataclass
class DigestFile:
    """Digests saved by `report --save-digests`, to be folded with others by `report`."""

    kind: str
    version: int
    digests: list[RankDigest]


def save_digests(digests: list[RankDigest], path: str) -> None:
    from compilediag.fsutil import write_output_file
    from compilediag.report.serial import to_json

    bare = [replace(d, cache_keys=[]) for d in digests]  # a diff reads them from traces
    text = to_json(DigestFile(DIGEST_KIND, DIGEST_VERSION, bare), indent=None)
    write_output_file(path, text, "--save-digests")


def load_digests(path: Path) -> list[RankDigest] | None:
    """The digests in a file `--save-digests` wrote; None if it is not one."""
    from compilediag.report.serial import from_plain

    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict) or data.get("kind") != DIGEST_KIND:
        return None
    if data.get("version") != DIGEST_VERSION:
        raise ValueError(f"digest version {data.get('version')!r}, not {DIGEST_VERSION}")
    return from_plain(DigestFile, data).digests


def _fx_lookups(h: History, compile_id: str) -> tuple[int, int]:
    """A compile's FX-graph cache hits and misses, as torch's metrics count them."""
    e = h.by_id.get(compile_id)
    return (e.metrics.fx_cache_hits, e.metrics.fx_cache_misses) if e is not None else (0, 0)


def digest(log: TraceLog, target: TargetInfo, keys: bool = False) -> RankDigest:
    """One rank's trace reduced; `keys`: with its FX-graph cache lookups (for `diff`)."""
    from compilediag.analysis.build import build_report
    from compilediag.analysis.compile.graphs import cudagraph_skips
    from compilediag.analysis.diff.caches import cache_keys
    from compilediag.analysis.history import build_history
    from compilediag.analysis.ranks.ranks import collective_schedule, graph_order
    from compilediag.analysis.recompiles.mode_advice import evaluation_modes

    h = build_history([log])
    versions = h.torch_versions
    env = Environment(
        source=Source.TRACE, torch=", ".join(versions) or "(version not in the trace)", files=1
    )
    r = build_report(h, None, target, environment=env)
    summary = RankSummary(
        rank=log.rank,
        file=log.path,
        summary=r.summary,
        break_sites=sorted(
            f"{os.path.basename(b.file)}:{b.line} {b.code}: {b.reason}" for b in r.graph_breaks
        ),
        recompile_reasons=sorted({f"{x.frame}: {x.failed_guard}" for x in r.recompiles}),
        changed=sorted({f"{x.frame}: {s}" for x in r.recompiles for s in changed_subjects(x)}),
        collectives=collective_schedule(h),
        graph_order=graph_order(h),
        caches=dict(r.compile_time.caches) if r.compile_time else {},
        graphs=[
            RankGraph(
                g.compile_id,
                f"{g.frame} ({os.path.basename(g.file)}:{g.line})",
                round(g.compile_time_s or 0.0, 3),
                *_fx_lookups(h, g.compile_id),
            )
            for g in r.graphs
        ],
    )
    skips = cudagraph_skips(h)
    d = RankDigest(r, summary, versions, log.records, skips, evaluation=evaluation_modes(h))
    if keys:
        d.cache_keys = cache_keys(h)
    d.key = fingerprint(d)
    return d


def _digest_file(args: tuple[str, TargetInfo, bool]) -> RankDigest:
    from compilediag.trace.parse import parse_path

    path, target, keys = args
    (log,) = parse_path(path)
    return digest(log, target, keys)


def digest_files(
    paths: list[Path],
    target: TargetInfo,
    jobs: int,
    on_done: Callable[[Path], None],
    keys: bool = False,
) -> Iterator[RankDigest]:
    """Each file parsed and digested in a pool of `jobs` processes, in order."""
    work = [(str(p), target, keys) for p in paths]
    if jobs <= 1 or len(paths) <= 1:
        for p, item in zip(paths, work, strict=True):
            yield _digest_file(item)
            on_done(p)
        return
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        for p, d in zip(paths, pool.imap(_digest_file, work), strict=True):
            yield d
            on_done(p)


def fingerprint(d: RankDigest) -> str:
    """What ranks that compiled alike share: their findings, without times, counts of
    time, or the rank in their compile ids."""
    r, s = d.report, d.summary
    assert r is not None

    return json.dumps(
        [
            [(b.file, b.line, b.reason, b.count) for b in r.graph_breaks],
            [(x.frame, x.failed_guard, unranked(x.compile_id)) for x in r.recompiles],
            [(g.frame, g.file, g.line, g.ops, unranked(g.compile_id)) for g in r.graphs],
            [(f.frame, f.fail_type, f.reason) for f in r.compile_failures],
            [(h.frame, h.compiles) for h in r.recompile_limit_hits],
            s.collectives,
            s.graph_order,
            sorted(s.caches),
        ]
    )


def fold(digests: Iterable[RankDigest], target: TargetInfo, run: JobRun | None = None) -> Report:
    """One Report for every rank: findings shown once, each with the ranks that have it;
    `ranks[]` keeps each rank's own summary, `rank_groups[]` the ranks that compiled alike."""
    from compilediag.analysis.ranks.ranks import divergence, same_guards_other_values
    from compilediag.report.ranksets import label_ranks

    ranks: list[RankSummary] = []
    owners: list[Report] = []  # each rank's findings (its group's first rank's)
    evaluations: list[set[str]] = []  # each rank's evaluation graphs, by its trace's modes
    skips: list[str] = []
    first: Report | None = None
    groups: dict[str, list[int]] = {}
    reps: dict[str, Report] = {}
    versions: set[str] = set()
    ignored: list[str] = []
    ctime = CompileTime()
    info = TraceInfo()
    unknown: Counter[str] = Counter()
    not_analysed: Counter[str] = Counter()
    for d in digests:
        if not d.records:
            ignored.append(d.summary.file)
            continue
        key = d.key or fingerprint(d)
        groups.setdefault(key, []).append(len(ranks))
        if d.report is not None:  # the first rank of a group stands for it
            reps.setdefault(key, d.report)
        elif key not in reps:
            raise ValueError(f"a digest of {d.summary.file} refers to findings not given")
        ranks.append(d.summary)
        owners.append(d.report or reps[key])
        evaluations.append(set(d.evaluation))
        first = first or d.report
        versions |= set(d.versions)
        skips += [x for x in d.cudagraph_skips if x not in skips]
        own = d.report or reps[key]  # a saved rank's figures are its group's first's
        _add_compile_time(ctime, own.compile_time)
        t = own.trace or TraceInfo()
        info.records += t.records
        info.skipped_lines += t.skipped_lines
        info.damaged_payloads += t.damaged_payloads
        unknown.update(t.unknown_records)
        not_analysed.update(t.not_analysed)
        info.produced_by = list(dict.fromkeys(info.produced_by + t.produced_by))
    if len(ranks) == 1 and first is not None:  # one rank: its own report
        return _finish(first, ignored, run, skips)
    label_ranks(ranks)
    env = Environment(
        source=Source.TRACE,
        torch=", ".join(sorted(versions)) or "(version not in the trace)",
        files=len(ranks),
    )
    report = Report(
        tool={"name": "compilediag", "version": VERSION},
        environment=env,
        target=TargetInfo(path=target.path, attr=target.attr),
        ranks=ranks,
    )
    info.files = [r.file for r in ranks]
    info.unknown_records, info.not_analysed = dict(unknown), dict(sorted(not_analysed.items()))
    report.trace = info
    report.compile_time = ctime if ctime.total_s or any(r.summary.graphs for r in ranks) else None
    # groups, largest first: the findings of the most common behaviour lead
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[1][0]))
    _mark_evaluation_graphs(ranks, reps, ordered, run, evaluations)
    _merge_findings(report, [(reps[k], members) for k, members in ordered])
    report.rank_groups = [_group(ranks, members) for _, members in ordered]
    # what one rank compiled (the worst rank's figures, their spread), not sums over ranks
    report.summary = job_summary(ranks)
    compared, notes = training_ranks(ranks, owners, run, evaluations)
    report.divergence = divergence(compared)
    report.notes += notes + same_guards_other_values(compared)
    return _finish(report, ignored, run, skips)


def _mark_evaluation_graphs(
    ranks: list[RankSummary],
    reps: dict[str, Report],
    ordered: list[tuple[str, list[int]]],
    run: JobRun | None,
    evaluations: list[set[str]],
) -> None:
    """A group's graphs that only its ranks' evaluation calls (run's probe counted them;
    else, by the trace, those made with grad off or in eval()) are marked: a graph of the
    same id on another rank can be its training graph (rank 0 evaluated first, so its 0/0
    is the evaluation's), and the two are not one row."""
    from compilediag.analysis.step.other_work import evaluation_graphs

    by_rank = {p.rank: p for p in (run.processes if run else []) if p.trains()}
    for key, members in ordered:
        p = by_rank.get(ranks[members[0]].rank)
        ids = evaluation_graphs(p) if p is not None else evaluations[members[0]]
        for g in reps[key].graphs:
            g.evaluation = unranked(g.compile_id) in ids


def training_ranks(
    ranks: list[RankSummary],
    owners: list[Report],
    run: JobRun | None,
    evaluations: list[set[str]],
) -> tuple[list[RankSummary], list[Finding]]:
    """The ranks as their training steps compiled them, with a note for each rank whose
    evaluation alone called graphs (run's probe counted its evaluation's calls; else the
    graphs its trace shows made with grad off or in eval(), beside one made to train)."""
    from compilediag.analysis.ranks.ranks import evaluation_notes, without_evaluation
    from compilediag.analysis.step.other_work import evaluation_graphs
    from compilediag.report.words import short_name

    by_rank = {p.rank: p for p in (run.processes if run else []) if p.trains()}
    compared, found = [], []
    for r, own, modes in zip(ranks, owners, evaluations, strict=True):
        p = by_rank.get(r.rank)
        if p is None:
            work, ids = "evaluation (grad off or eval(), by its graphs' guards)", modes
        else:
            names = sorted({short_name(w.function) for w in p.other_work if w.kind == "evaluation"})
            work = "evaluation" + (f" ({', '.join(names)})" if names else "")
            ids = evaluation_graphs(p)
        adjusted, graphs = without_evaluation(r, own, ids, work)
        compared.append(adjusted)
        found += [graphs] if graphs is not None else []
    return compared, evaluation_notes(found, len(ranks))


def _finish(report: Report, ignored: list[str], run: JobRun | None, skips: list[str]) -> Report:
    """What every trace report ends with: the files passed over, damage, the job's run."""
    from compilediag.analysis.notes import trace_notes

    info = report.trace or TraceInfo()
    info.ignored_files = [os.path.basename(p) for p in ignored]
    report.trace = info
    report.notes += trace_notes(info)
    if run is not None:
        from compilediag.analysis.step.runtime import apply_runtime

        apply_runtime(report, run, skips)
    return report


def _add_compile_time(total: CompileTime, one: CompileTime | None) -> None:
    if one is None:
        return
    for f in fields(CompileTime):
        mine = getattr(one, f.name)
        if f.name == "caches":
            for k, n in one.caches.items():
                total.caches[k] = total.caches.get(k, 0) + n
        elif f.name == "bypasses":
            for cache, reasons in one.bypasses.items():
                into = total.bypasses.setdefault(cache, {})
                for reason, n in reasons.items():
                    into[reason] = into.get(reason, 0) + n
        elif isinstance(mine, float):  # (tracing: a model run's, never a trace's)
            setattr(total, f.name, round(getattr(total, f.name) + mine, 6))


def _merge_findings(report: Report, groups: list[tuple[Report, list[int]]]) -> None:
    """Each group's findings once; a finding several groups share, once with all their
    ranks (`ranks`: positions in report.ranks)."""

    def merged(items: Callable[[Report], list], key: Callable) -> list:
        seen: dict = {}
        for rep, members in groups:
            for item in items(rep):
                k = key(item)
                if k in seen:
                    seen[k].ranks = sorted({*seen[k].ranks, *members})
                else:
                    item.ranks, seen[k] = list(members), item
        return list(seen.values())

    def once(items: Callable[[Report], list], key: Callable) -> list:
        seen: dict = {}
        for rep, _ in groups:
            for x in items(rep):
                seen.setdefault(key(x), x)
        return list(seen.values())

    site = lambda b: (b.file, b.line, b.reason)  # noqa: E731
    occurrences: Counter[tuple] = Counter()
    for rep, members in groups:  # each rank of a group broke as its first did
        for b in rep.graph_breaks:
            occurrences[site(b)] += b.count * len(members)
    report.graph_breaks = merged(lambda r: r.graph_breaks, site)
    for b in report.graph_breaks:
        b.count = occurrences[site(b)]
    report.recompiles = merged(
        lambda r: r.recompiles, lambda x: (x.frame, x.failed_guard, unranked(x.compile_id))
    )
    report.graphs = merged(
        lambda r: r.graphs,
        lambda g: (g.frame, g.file, g.line, g.ops, unranked(g.compile_id), g.evaluation),
    )
    report.graphless = merged(
        lambda r: r.graphless, lambda g: (g.frame, g.file, g.line, unranked(g.compile_id))
    )
    report.kernels = once(lambda r: r.kernels, lambda k: (k.name, unranked(k.compile_id)))
    report.recompile_limit_hits = once(
        lambda r: r.recompile_limit_hits, lambda h: (h.frame, h.file, h.line)
    )
    report.compile_failures = once(
        lambda r: r.compile_failures, lambda f: (f.frame, f.fail_type, f.reason)
    )
    report.notes = list(dict.fromkeys(_group_notes(report, groups)))
    report.errors = list(dict.fromkeys(e for rep, _ in groups for e in rep.errors))


# notes every rank's run raises alike (its counts its own): said once, the first group's
ONCE_FOR_ALL = (FindingKind.COMPILE_COST, FindingKind.NO_PROVENANCE)


def _group_notes(report: Report, groups: list[tuple[Report, list[int]]]) -> list[Finding]:
    """Each group's notes; a compile's cost and a note every group raises alike are said
    once, for the most common group's ranks (the first), with the ranks that raised it."""
    out = []
    for i, (rep, _) in enumerate(groups):
        for n in rep.notes:
            if n.kind not in ONCE_FOR_ALL:
                out.append(n)
                continue
            if i:
                continue
            raised = [m for r, m in groups if any(x.kind == n.kind for x in r.notes)]
            if n.kind == FindingKind.COMPILE_COST or len(raised) < 2:
                out.append(n)
                continue
            every = sorted(x for m in raised for x in m)
            whose = rank_set(report.ranks, every)
            counts = rank_set(report.ranks, groups[0][1])
            said = f"{n.message} (so say {whose}; the counts are those of {counts})"
            out.append(replace(n, message=said))
    return out


def _group(ranks: list[RankSummary], members: list[int]) -> RankGroup:
    first = ranks[members[0]].summary
    times = sorted(ranks[i].summary.compile_time_s for i in members)
    slowest = max(members, key=lambda i: ranks[i].summary.compile_time_s)
    return RankGroup(
        ranks=list(members),
        summary=Summary(
            graphs=first.graphs,
            graph_breaks=first.graph_breaks,
            unique_graph_breaks=first.unique_graph_breaks,
            recompiles=first.recompiles,
            kernels=first.kernels,
            compile_time_s=times[len(times) // 2],
            compile_failures=first.compile_failures,
        ),
        compile_max_s=times[-1],
        slowest=ranks[slowest].label,
    )


def report_from_traces(
    logs: list[TraceLog], target: TargetInfo, run: JobRun | None = None
) -> Report:
    """The explain report from parsed traces: one rank's findings, or every rank's folded
    (analysis/ranks/fold.py). Files with no trace record in them (an empty log, an unrelated text
    file) are not ranks: they are listed as ignored."""
    return fold((digest(log, target) for log in logs), target, run)


def report_from_files(
    paths: list[Path],
    target: TargetInfo,
    run: JobRun | None = None,
    on_file: Callable[[Path], None] = lambda p: None,
    save: list[RankDigest] | None = None,
) -> Report:
    """The same from trace files, each parsed and reduced in a process of its own (as many
    at a time as there are cores), so that memory holds one rank's trace at a time; and
    from digest files saved by `report --save-digests` (on other machines). `save`
    collects the digests for saving."""
    digests = read_digests(paths, target, on_file)
    if save is not None:
        digests = _collect(digests, save)
    return fold(digests, target, run)


def read_digests(
    paths: list[Path], target: TargetInfo, on_file: Callable[[Path], None], keys: bool = False
) -> Iterator[RankDigest]:
    traces = []
    for p in paths:
        saved = load_digests(p) if p.suffix == ".json" else None
        if saved is None:
            traces.append(p)
            continue
        yield from saved
        on_file(p)
    jobs = min(len(traces), os.cpu_count() or 1)
    yield from digest_files(traces, target, jobs, on_file, keys)


def _collect(digests: Iterable[RankDigest], into: list[RankDigest]) -> Iterator[RankDigest]:
    """Pass the digests on, keeping each (its report only where it is the first of its
    group: the others' findings are the same)."""
    seen: set[str] = set()
    for d in digests:
        into.append(d if d.key not in seen else replace(d, report=None))
        seen.add(d.key)
        yield d
