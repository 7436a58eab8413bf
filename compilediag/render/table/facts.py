"""The terminal view's facts: kernels, the cross-check, a job's run time, compile time
and timings."""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Console, ConsoleOptions, RenderResult
from rich.padding import Padding
from rich.text import Text

from compilediag.analysis.compile.timings import UNRELIABLE
from compilediag.analysis.step.other_work import STALL
from compilediag.paths import short_path
from compilediag.render import (
    cache_text,
    ms,
    plural,
    seconds,
    where,
)
from compilediag.render.table.parts import Row, details
from compilediag.render.tried import tried_words, try_baseline_words
from compilediag.render.views import (
    bound_words,
    kernel_steps_words,
    rank_step_rows,
    step_text,
    step_words,
    tracing_words,
    unmeasured_words,
    window_notes,
)
from compilediag.render.window_words import kernel_timing_words, took_words
from compilediag.report.model import Breakdown, CompileTime, Report, Runtime
from compilediag.report.numerics import COMPILED_CLOSER, DIFFER, MATCH, RANDOM_ONLY, Numerics
from compilediag.report.vocabulary import FindingKind
from compilediag.report.words import steps_words

KIND_LABELS = {
    "persistent_reduction": "persistent",
    "extern": "library",
    "copy": "copy (moves data, computes nothing)",
}


def kernel_name(name: str) -> str:
    """A CUDA kernel's C++ name without its template arguments and parameters (`void
    at::native::vectorized_elementwise_kernel<4, ...>(...)` -> `at::native::vectorized_
    elementwise_kernel`): the JSON and HTML keep the whole."""
    short = name.removeprefix("void ").replace("(anonymous namespace)::", "")
    cut = min((i for i in (short.find("<"), short.find("(", 1)) if i > 0), default=len(short))
    return short[:cut]


def kernel_time_blocks(report: Report, limit: int | None) -> list:
    """`run --profile-steps`: the window's kernels, most time lost against the device's
    peak first, each with its time a step, what it achieved, the library call that
    launched it (its op and input shapes, a line of their own) and its lines."""
    t = report.timings
    if t is None or not t.kernels:
        return []
    shown = t.kernels if limit is None else t.kernels[:limit]
    total = sum(k.ms for k in t.kernels)
    title = f"\nKernels in the window ({plural(len(t.kernels), 'kernel')}, {ms(total)} a step"
    title += kernel_steps_said(report.runtime, t.breakdown)
    title += "; against " + t.peak if t.peak else ""
    rows: list = [Text(title + ")", style="bold")]
    target = report.target.path
    for k in shown:
        # (its name whole, its figures under it where both do not fit: a look read
        # `…scalar_te` / `nsor_view_0` folded)
        rows.append(NamedLine(kernel_name(k.name), " · ".join(kernel_timing_words(k, t.peak)), ""))
        call = " ".join(part for part in (k.op, k.shapes) if part)  # a library call's
        if call:
            rows.append(Padding(Text(call, style="dim"), (0, 0, 0, 6)))
        if k.source_lines:
            lines = "from " + compact_lines(k.source_lines, target)
            rows.append(Padding(Text(lines, style="dim"), (0, 0, 0, 6)))
    if len(shown) < len(t.kernels):
        rows.append(Text(f"  … {len(t.kernels) - len(shown)} more: `--format json` or "
                         "`--html FILE` lists all", style="dim"))  # fmt: skip
    return rows


def kernel_steps_said(r: Runtime | None, b: Breakdown | None) -> str:
    """` of 70 ms: steps 10, 11, 12, 14, 15, under torch.profiler; step 13 left out (it held
    other work)`: what the kernels are set against, their own steps (the window's where an
    older report lacks them)."""
    if r is not None and r.kernel_step_ms:
        said = f" of {ms(r.kernel_step_ms)}: {kernel_steps_words(r)}, under torch.profiler"
        if r.kernel_steps_held:
            said += (
                f"; {steps_words(r.kernel_steps_held)} left out (an evaluation, a checkpoint "
                "or a compile in it)"
            )
        if r.kernel_steps_stalled:
            said += (
                f"; {steps_words(r.kernel_steps_stalled)} left out (over {STALL:g}x the "
                "others: the job's own work, or a pause)"
            )
        if r.kernel_steps_waited:
            said += (
                f"; {steps_words(r.kernel_steps_waited)} in the profile of a rank that waited "
                "in it for another's evaluation or checkpoint (in its kernel rows, not in its "
                "collectives a step)"
            )
        return said
    return f" of {ms(b.call_ms)}" if b is not None and b.call_ms else ""


def kernel_blocks(report: Report, limit: int | None) -> list:
    gen = [k for k in report.kernels if k.kind != "extern"]
    ext = [k for k in report.kernels if k.kind == "extern"]
    if not report.kernels:
        return []
    title = (
        f"\nKernels ({plural(len(gen), 'generated kernel')}, {plural(len(ext), 'library call')})"
    )
    several = len({k.compile_id for k in report.kernels}) > 1
    shown = report.kernels if limit is None else (gen[:limit] + ext[: max(0, limit - len(gen))])
    target = report.target.path
    # One kernel a line, not a table: a kernel name cut or folded can't be looked up, and
    # at 80 columns a table has no room for the name beside the rest. Wrapping only
    # happens at spaces, after the name.
    rows: list[NamedLine] = []
    for k in shown:
        facts = [KIND_LABELS.get(k.kind, k.kind)]
        if several:
            facts.insert(0, f"graph {k.compile_id}")
        if k.source_lines:
            facts.append("from " + compact_lines(k.source_lines, target))
        if k.modules:
            facts.append("in " + ", ".join(k.modules))
        ops = ", ".join(o.removeprefix("aten.") for o in k.ops)
        rows.append(NamedLine(
            k.name.removeprefix("torch.ops.").removesuffix(".default"), " · ".join(facts),
            f"lays out data for {ops}" if k.kind == "copy" and ops else ops,
        ))  # fmt: skip
    # what the count counts against torch's generated_kernel_count is the HTML report's
    # and docs/usage.md's to say: a paragraph on every run is noise here
    out: list = [Text(title, style="bold")]
    if any(k.ops_by_name for k in shown):
        out.append(Padding(Text(
            "ops by each kernel's name where Inductor's code names none (its C++ kernels); a "
            "name can leave an op out", style="dim",
        ), (0, 0, 0, 2)))  # fmt: skip
    out += rows
    if len(shown) < len(report.kernels):
        more = len(report.kernels) - len(shown)
        where = {  # a trace has no model to dump, nor has a capture() block
            "trace": "`--format json` or `--html FILE` lists all",
            "in-process": "the report's `kernels` list all",
        }.get(report.environment.source, "`compilediag dump-kernels` lists all")
        out.append(Text(f"  ... {more} more: {where}", style="dim"))
    return out


@dataclass
class NamedLine:
    """A name (a kernel's, a remedy's), its facts beside it where the width holds both (else
    on a line of their own: a fused kernel's name can fill the width, and facts folded under
    it read as part of it), and a line below (a kernel's ops), each wrapped under its own
    start; the name is never folded."""

    name: str
    facts: str | Text
    ops: str

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        facts = self.facts if isinstance(self.facts, Text) else Text(self.facts)
        if 2 + len(self.name) + 2 + len(facts) <= options.max_width:
            yield Padding(Text.assemble((self.name, "bold"), "  ", facts), (0, 0, 0, 2))
        else:  # a name past the width stays whole, for search (the terminal wraps it)
            yield Text.assemble("  ", (self.name, "bold"), no_wrap=True, overflow="ignore")
            yield Padding(facts, (0, 0, 0, 6))
        if self.ops:
            yield Padding(Text(self.ops, style="dim"), (0, 0, 0, 6))


def compact_lines(places: list[str], target: str = "") -> str:
    """[`/a/model.py:28`, `/a/model.py:24`] -> `L24,28` for the model file itself, else
    `other.py:24,28` (the table has no room for folders)."""
    by_file: dict[str, list[int]] = {}
    for place in places:
        path, _, line = place.rpartition(":")
        key = "L" if path == target else path.rsplit("/", 1)[-1] + ":"
        by_file.setdefault(key, []).append(int(line) if line.isdigit() else 0)
    return " ".join(f"{f}{','.join(map(str, sorted(set(ls))))}" for f, ls in by_file.items())


def cross_check_lines(report: Report) -> list:
    cc = report.cross_check
    assert cc is not None
    if cc.error:
        return [Text(f"\nCross-check: torch._dynamo.explain failed: {cc.error}", style="yellow")]
    if cc.agree:
        sites = len({(s.file, s.line) for s in cc.explain_sites})
        said = f"the same break site{'s' * (sites != 1)} ({sites})"
        if cc.explain_graph_breaks != sites:  # explain counts its graphs less one (look 27)
            said += (
                f"; its graph_break_count, {cc.explain_graph_breaks}, is its graphs less one, "
                "not its breaks"
            )
        return [Text(f"\nCross-check: torch._dynamo.explain agrees: {said}.", style="green")]
    lines: list = [
        Text(
            f"\nCross-check: torch._dynamo.explain differs ({len(cc.disagreements)})",
            style="bold yellow",
        )
    ]
    for d in cc.disagreements:
        who = "only in the trace" if d.seen_by == "trace" else "only in explain"
        lines.append(Text(f"  {where(d.file or '?', d.line or 0)} {who}: {d.reason}"))
        lines.append(details([("", Text(d.believe, style="dim"))]))
    return lines


def runtime_lines(report: Report) -> list:
    """`compilediag run`: how the job ended, its steps, and where a step's time went."""
    r = report.runtime
    assert r is not None
    ended = "was interrupted" if r.interrupted else (
        f"was ended by {r.signal}" if r.signal else f"exited with status {r.exit_code}"
    )  # fmt: skip
    rows: list[Row] = [
        ("job", Text(f"{' '.join(r.command)}: {ended} after {seconds(r.wall_s)}" if r.command
                     else f"the capture() block ran for {seconds(r.wall_s)}",
                     style="" if r.exit_code == 0 else "yellow")),
    ]  # fmt: skip
    if r.step_frame:
        rows.append(("steps", Text(step_words(r))))
    if r.bound is not None:
        rows.append(("bound by", Text(bound_words(r.bound), style="bold")))
    if r.try_baseline is not None:
        rows.append(("tried", Text(try_baseline_words(r.try_baseline))))
    for i, t in enumerate(r.tried):
        style = "green" if t.kept else "yellow" if "not kept" in t.why or t.undecided else "dim"
        label = "tried" if i == 0 and r.try_baseline is None else ""
        rows.append((label, Text(tried_words(t), style=style)))
    b = report.timings.breakdown if report.timings else None
    if r.window:
        if b is not None:
            rows.append(("a step", Text(step_text(r, b))))
        else:
            rows.append(("a step", Text(unmeasured_words(r), style="dim")))
        rows.extend((label, Text(text)) for label, text in rank_step_rows(r))
        rows.extend(
            (label, Text(text, style="yellow")) for label, text in window_notes(r, report.timings)
        )
        notes = report.timings.notes if report.timings else []
        rows.extend(
            ("advice" if i == 0 else "", Text(n, style="green")) for i, n in enumerate(notes)
        )
    elif not r.processes and not report.graphs and report.compile_time:
        n = len(report.compile_failures)
        why = "failures above say" if n > 1 else "failure above says" if n else "breaks above say"
        rows.append(("calls", Text(
            "none: torch compiled no graph in this job, and no process stepped an optimizer "
            f"(the {why} why nothing compiled)", style="dim",
        )))  # fmt: skip
    elif not r.processes:
        rows.append(("calls", Text(
            "not counted: no process of the job loaded compilediag's bootstrap (a Python "
            "started with -S or -I does not)", style="dim",
        )))  # fmt: skip
    else:
        rows.append(("a step", Text("not timed: pass --profile-steps A-B", style="dim")))
    if r.numerics is not None:  # --check-numerics
        parted = r.numerics.first_step is not None
        rows.append(("losses", Text(r.numerics.words, style="bold red" if parted else "")))
    if r.cudagraph_skips or r.cudagraph_skip_reasons or r.cudagraph_rerecords:
        said = f"{plural(r.cudagraph_skips, 'graph')} ran without a CUDA graph" + (
            f"; {plural(r.cudagraph_rerecords, 'CUDA graph')} recorded again"
            if r.cudagraph_rerecords else ""
        )  # fmt: skip
        rows.append(("cudagraphs", Text(said, style="yellow")))
        for why in r.cudagraph_skip_reasons:
            rows.append(("", Text(f"skipped: {why}", style="yellow")))
    rows += compile_rows(report)
    return [details(rows)]


def compile_rows(report: Report) -> list[Row]:
    """The compile's time by phase, Dynamo's tracing by function, the caches (with their
    bypasses' reasons): the same rows for explain, run and a trace."""
    ct = report.compile_time
    if not ct or not ct.total_s:
        return []
    rows: list[Row] = [
        (
            "compile",
            Text(f"{seconds(ct.total_s)} = {compile_phases(ct, report.environment.backend)}"),
        )
    ]
    if ct.tracing is not None and ct.tracing.total_s:
        rows.append(("tracing", Text(tracing_words(ct.tracing))))
    if ct.caches:
        rows.append(("caches", Text(cache_text(ct.caches, report.environment.cold, ct.bypasses))))
    return rows


def compile_phases(ct: CompileTime, backend: str = "") -> str:
    """The compile's phases; under the eager backend (no AOTAutograd, no Inductor: a look
    read "aot 2 ms" there) Dynamo's and the backend's call alone."""
    if backend == "eager" and not ct.inductor_s and not ct.codegen_s:
        return f"dynamo {seconds(ct.dynamo_s)} · the eager backend {seconds(ct.aot_s)}"
    inductor = f"inductor {seconds(ct.inductor_s)} · codegen {seconds(ct.codegen_s)}"
    ran = any(k.startswith("fx_graph_cache_") for k in ct.caches)  # (Inductor's own records)
    if not ct.inductor_s and not ct.codegen_s and (backend.startswith("aot_") or not ran):
        inductor = ""  # (a look read "inductor 0 ms · codegen 0 ms" under aot_eager)
    if not ct.inductor_s and not ct.codegen_s and ct.caches.get("fx_graph_cache_hit"):
        # (a look read "inductor 0 ms" as Inductor not run: its graphs came from its cache,
        # loaded inside AOTAutograd's phase)
        inductor = "inductor: its graphs loaded from its cache, within aot"
    phases = f"dynamo {seconds(ct.dynamo_s)} · aot {seconds(ct.aot_s)}" + (
        f" · {inductor}" if inductor else ""
    )
    if ct.backward_s:
        phases += f" · backward {seconds(ct.backward_s)}"
    if ct.kernel_compile_s:
        # across the phases (forward and backward): its own clause, not the last phase's
        phases += f"; {seconds(ct.kernel_compile_s)} of it compiling kernels"
    return phases


def timing_lines(report: Report) -> list:
    t = report.timings
    if report.runtime is not None:
        return runtime_lines(report)
    if t is None:
        if report.numerics is not None:  # the compile failed: the custom ops' checks
            return [details(numerics_rows(report.numerics))]
        if report.environment.source != "trace":
            return [details(took_rows(report))] if report.took_s else []
        out: list = [
            Text(
                "  not measured: a trace has none (`compilediag run --profile-steps A-B -- "
                "COMMAND` times steps)",
                style="dim",
            )
        ]
        if facts := compile_rows(report):
            out.append(details(facts))
        return out
    rows: list[Row] = [("first call", Text(f"{seconds(t.first_call_s)} (compile + run)"))]
    if t.eager_ms and t.compiled_ms:
        e, c = t.eager_ms, t.compiled_ms
        for label, s in (("eager", e), ("compiled", c)):
            fastest = f", min {ms(s.min)}" if s.min is not None else ""
            spread = f"IQR {ms(s.iqr)}{fastest}" if s.n != 1 else "1 timed block: no spread"
            rows.append((label, Text(f"{ms(s.median)} a call ({spread})")))
        if t.noise:
            rows.append(("speedup", Text(f"{t.speedup:.2f}x, not reliable: {noise_once(report)}",
                                         style="yellow")))  # fmt: skip
        else:
            rows.append(("speedup", Text(f"{t.speedup:.2f}x", style="bold")))
        if t.device_ms:
            d = t.device_ms
            rows.append(
                (
                    "GPU time",
                    Text(
                        f"eager {ms(d.eager_ms)} · compiled {ms(d.compiled_ms)} a call "
                        f"({d.eager_ms / d.compiled_ms:.2f}x); compiled is {t.bound}"
                    ),
                )
            )
        if t.breakdown:
            rows.append(("where", Text(_where_words(t.breakdown))))
        method = (
            f"median of {t.repeat} interleaved blocks of {plural(t.calls_per_block, 'call')}, "
            f"after {t.warmup} warm-up calls; {t.method}"
        )
        rows.append(("method", Text(method, style="dim")))
    rows[1:1] = compile_rows(report)
    if t.mutated_inputs:
        rows.append(
            (
                "inputs",
                Text(
                    f"the model changes {', '.join(t.mutated_inputs)} in place: eager and "
                    "compiled each ran on a fresh copy of the inputs"
                ),
            )
        )
    for skip in t.cudagraph_skips:
        rows.append(("cudagraphs", Text(f"skipped: {skip}", style="yellow")))
    # one label for all the reasons; "why slow?" only where compiled is slower (a look read it
    # over a BERT's 1.17x)
    label = "why slow?" if t.speedup is not None and t.speedup < 1 else "notes"
    for i, note in enumerate(t.notes):
        rows.append((label if i == 0 else "", Text(note, style="yellow")))
    return [details(rows + outputs_rows(report) + took_rows(report))]


def noise_once(report: Report) -> str:
    """The timings' noise, where the header's warning already gives a part of it (the busy
    cores: a look read the paragraph twice), that part as a pointer to it."""
    noise = report.timings.noise if report.timings else ""
    for f in report.notes:
        flag = f.message.removeprefix(UNRELIABLE).removesuffix(".")
        if f.kind == FindingKind.UNRELIABLE_TIMING and flag and flag in noise:
            noise = noise.replace(flag, "the cores were busy (the warning above)")
    return noise


def _where_words(b: Breakdown) -> str:
    """Where a compiled call's (or step's) time goes, by torch.profiler's shares."""
    return (
        f"a compiled {'step' if b.backward_ms else 'call'}, {ms(b.call_ms)}: "
        f"graphs {ms(b.in_graphs_ms)} · Python between them {ms(b.between_graphs_ms)}"
        + (f" · the call's own code around them {ms(b.in_call_ms)}" if b.in_call_ms else "")
        + (f" · backward {ms(b.backward_ms)}" if b.backward_ms else "")
        + f" · outside compiled code {ms(b.outside_ms)} (torch.profiler's "
        f"shares of {plural(b.calls, 'call')})"
    )


def took_rows(report: Report) -> list[Row]:
    """What compilediag's own run took (report.took_s), its phases largest first."""
    if not report.took_s:
        return []
    return [("took", Text(took_words(report.took_s), style="dim"))]


def outputs_rows(report: Report) -> list[Row]:
    """Compiled's outputs against eager's: judged against float64 where the run did
    (numerics), else within the dtype's tolerance."""
    t = report.timings
    if report.numerics is not None:
        return numerics_rows(report.numerics)
    if t is None or t.outputs_match is None:
        return []
    verdict = "match eager" if t.outputs_match else "DIFFER from eager"
    style = "green" if t.outputs_match else "bold red"
    return [("outputs", Text(f"{verdict} (max abs err {t.max_abs_err:.2e})", style=style))]


NUMERICS_STYLE = {MATCH: "green", COMPILED_CLOSER: "cyan", RANDOM_ONLY: "cyan", DIFFER: "bold red"}


def numerics_rows(n: Numerics) -> list[Row]:
    """Compiled against eager and float64: the verdict in words, the repro, what the
    search could not do."""
    said = n.words.removeprefix("outputs ")  # (the row says it)
    rows: list[Row] = [("outputs", Text(said, style=NUMERICS_STYLE.get(n.verdict, "")))]
    if n.repro:
        rows.append(("repro", Text(f"python {short_path(n.repro)}  (runs alone; exit 1 while "
                                   "it departs)")))  # fmt: skip
    if n.searched_s:
        rows.append(("", Text(f"the search for the cause took {seconds(n.searched_s)}",
                              style="dim")))  # fmt: skip
    for note in n.notes:
        rows.append(("", Text(note, style="yellow")))
    return rows
