"""The numerics of a run's first call: its outputs judged against a float64 reference, and
where they differ, the search for why (random numbers first, then the graph, stage and op)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from compilediag.harness.checks import fresh, tensors_of
from compilediag.harness.numerics import search
from compilediag.harness.numerics.closeness import judge_all
from compilediag.harness.numerics.graphs import capture
from compilediag.harness.numerics.reference import float64_run
from compilediag.harness.numerics.repro import write_repro
from compilediag.report.numerics import (
    COMPILED_CLOSER,
    DIFFER,
    MATCH,
    NOT_COMPARED,
    RANDOM_ONLY,
    STAGES,
    Numerics,
)

WORST_FIRST = (DIFFER, COMPILED_CLOSER, MATCH)


def verdict_of(outputs: list[Any]) -> str:
    seen = {o.verdict for o in outputs}
    return next((v for v in WORST_FIRST if v in seen), MATCH)


def stages_for(backend: str) -> list[str]:
    """The stages to try, in order, ending with the run's own backend."""
    if backend in STAGES:
        return list(STAGES[: STAGES.index(backend) + 1])
    return [*STAGES[:-1], backend] if backend != "eager" else []


@contextlib.contextmanager
def own_compiles(torch: Any, random: bool) -> Any:
    """The search's compiles: none writes a cache of the user's (the run's own compile of a
    whole graph is read back from them: search.GraphCheck.judged), and torch's own random
    numbers where the graphs draw any."""
    with torch._inductor.config.patch(force_disable_caches=True, fallback_random=random):
        yield


def numerics(
    torch: Any,
    model: Any,
    call: Any,
    eager_out: Any,
    compiled_out: Any,
    run: Any,
    backend: str,
    device: str,
    model_file: str,
    repro_dir: str,
    say: Callable[[str], None] = lambda _: None,
) -> Numerics:
    """Judge the outputs; where they differ, search for the cause (`run`: one call; `say`:
    what it is doing, for the progress line)."""
    ref, random_ops, note = float64_run(torch, model, fresh(call), run, device)
    n = Numerics(random_ops=random_ops)
    if note:
        n.notes.append(note)
    use_ref = ref is not None and not random_ops
    n.tolerance_from = "float64 reference" if use_ref else (
        "dtype (the call draws random numbers: a float64 run draws others)" if random_ops
        else "dtype (no float64 reference)"
    )  # fmt: skip
    n.outputs = judge_all(torch, tensors_of, eager_out, compiled_out, ref if use_ref else None)
    n.verdict = verdict_of(n.outputs)
    if n.verdict == COMPILED_CLOSER:
        n.setting = "torch._inductor.config.emulate_precision_casts = True"
    if n.verdict != DIFFER:
        return n
    start = time.perf_counter()
    try:
        _search(torch, n, model, call, run, backend, model_file, repro_dir, use_ref, say)
    except Exception as e:  # the search must never lose the report
        n.notes.append(f"the search for the cause stopped: {type(e).__name__}: {e}"[:300])
    finally:
        torch._dynamo.reset()
    n.searched_s = round(time.perf_counter() - start, 3)
    return n


def custom_op_checks(torch: Any, model: Any, call: Any, run: Any) -> Numerics | None:
    """After a compile that failed: torch.library.opcheck on the custom ops of the graphs
    Dynamo captures (a wrong fake kernel fails the compile on newer torch), None where
    none fails."""
    try:
        with own_compiles(torch, random=False):
            graphs = capture(torch, model, call, run)
            found = search.opchecks(torch, [search.GraphCheck(torch, g, False, "") for g in graphs])
    except Exception:  # the failure itself is the report's; this only adds to it
        return None
    finally:
        torch._dynamo.reset()
    if not any(c.test for c in found):
        return None
    return Numerics(verdict=NOT_COMPARED, opcheck=found)


def _random_rerun(torch: Any, n: Numerics, model: Any, call: Any, run: Any, backend: str) -> bool:
    """Eager and compiled again from one seed, compiled with torch's own random numbers
    (fallback_random): True where the difference was random numbers only."""
    with own_compiles(torch, random=True):
        torch._dynamo.reset()
        torch.manual_seed(search.SEED)
        eager = run(model, fresh(call))
        compiled = torch.compile(model, backend=backend)
        torch.manual_seed(search.SEED)
        again = run(compiled, fresh(call))
        torch._dynamo.reset()
    judged = judge_all(torch, tensors_of, eager, again, None)
    n.random_rerun = verdict_of(judged)
    return n.random_rerun != DIFFER


def _search(
    torch: Any,
    n: Numerics,
    model: Any,
    call: Any,
    run: Any,
    backend: str,
    model_file: str,
    repro_dir: str,
    use_ref: bool,
    say: Callable[[str], None],
) -> None:
    random = bool(n.random_ops)
    if random:
        say("outputs differ: eager and compiled again, with torch's own random numbers")
    if random and _random_rerun(torch, n, model, call, run, backend):
        n.verdict = RANDOM_ONLY
        n.setting = "torch._inductor.config.fallback_random = True"
        return
    if not repro_dir:  # a remedy's run (--try-fixes): its verdict only, the run's search said
        return
    say("outputs differ: finding the first graph, stage and op that depart")
    with own_compiles(torch, random):
        graphs = capture(torch, model, call, run)
        checks = [search.GraphCheck(torch, g, use_ref, backend) for g in graphs]
        n.opcheck = search.opchecks(torch, checks)
        c = search.first_graph(checks, backend)
        if c is None:
            n.notes.append(
                f"no graph departs from eager when run alone under {backend}: the difference "
                "comes from between the graphs (what runs eagerly, or their order)"
            )
            return
        n.stage = search.first_stage(c, stages_for(backend)) or backend
        if n.stage == backend and not c.departs(backend, c.outputs(), cached=False):
            n.notes.append(
                f"graph {c.g.index} compiled afresh agrees with eager; the compile the run "
                "used (read back from torch's cache) departs: the backend compiled this graph "
                "two ways in one process, and the ops below are searched in fresh compiles"
            )
        n.first_node = search.first_node(c, n.stage)
        if n.first_node is not None and not n.first_node.makes:
            n.first_nonfinite = search.first_node(c, n.stage, nonfinite=True)
        n.eager_nonfinite = search.eager_nonfinite(torch, c) if use_ref else None
        at = n.first_node
        where = f" first at {at.file}:{at.line} ({at.op})" if at and at.file else ""
        tolerances = [j.tolerance for j in c.judged(n.stage, c.outputs())]
        n.repro = write_repro(
            torch, c, n.stage, random, model_file, Path(repro_dir), where, tolerances
        )
        if n.stage == "inductor":
            say("outputs differ: torch's CompilerBisector on the graph")
            n.bisector = search.bisector(torch, c)
