"""Ready to serve (#69), end to end with Inductor on this machine's CPU, each figure against
torch's own answer on the same stream in a fresh process without compilediag
(tests/fixtures/serving/torch_side.py: torch's CompileCounterWithBackend, each graph's runs
counted):

- a padded-batch classifier its authors compile with dynamic=False, its stream from the
  model file's get_request_stream(): twelve lengths, so the recompile limit (8) is hit and
  later requests of new lengths run eager;
- a small decoder with an attention mask, served a stream of (batch, length) requests from
  a skewed distribution (tests/fixtures/serving/streams.py: many short, a few long), and a
  second stream of the same distribution kept apart to check the plan.

The plan's code is run as a user pastes it, on a stream the plan was not made from."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, measured_twice, run_json, shared_json

pytestmark = pytest.mark.full

SERVING = ROOT / "tests" / "fixtures" / "serving"
CLASSIFIER = ROOT / "sample_models" / "padded_classifier.py"
DECODER = SERVING / "decoder.py"
GENERATE = SERVING / "generate.py"  # a generate() loop over a static KV cache
STREAM = SERVING / "decoder_stream.jsonl"  # streams.skewed(1)
APART = SERVING / "decoder_stream_apart.jsonl"  # streams.skewed(2)

RUNS = {
    "classifier": ("recompiles", str(CLASSIFIER), "--no-dynamic", "--no-numerics",
                   "--max-recompiles-after-warmup", "0"),
    "decoder": ("recompiles", str(DECODER), "--requests", str(STREAM), "--no-numerics",
                "--no-cold-start"),
    "generate": ("recompiles", str(GENERATE), "--no-numerics", "--no-cold-start"),
}  # fmt: skip
MODELS = {"classifier": CLASSIFIER, "decoder": DECODER, "generate": GENERATE}
STREAMS = {"classifier": "-", "decoder": str(STREAM), "generate": "-"}


def _torch(*args: str) -> dict:
    proc = subprocess.run(
        [sys.executable, str(SERVING / "torch_side.py"), *args],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "TORCHINDUCTOR_CACHE_DIR": os.environ.get("TORCHINDUCTOR_CACHE_DIR", "")}
        if os.environ.get("TORCHINDUCTOR_CACHE_DIR") else None,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", ["classifier", "decoder", "generate"])
def test_the_forecast_is_torchs_count_over_the_same_stream(name: str) -> None:
    """The graphs the stream compiles and the requests that ran eager, as torch counts them
    over the same stream compiled the same way (Inductor; dynamic=False for the classifier)."""
    report, proc = shared_json(*RUNS[name])
    assert proc.returncode == 0, proc.stderr
    s = report["serving"]
    static = ["static"] if name == "classifier" else []
    theirs = _torch("count", str(MODELS[name]), STREAMS[name], *static)
    assert s["graphs"] == report["summary"]["graphs"] == theirs["graphs"]
    assert s["recompiles"] == report["summary"]["recompiles"] == theirs["graphs"] - 1
    eager = sorted(n for hit in s["limit_hits"] for n in hit["eager_requests"])
    assert eager == theirs["eager"]
    as_is = next(p for p in s["plans"] if p["kind"] == "as_is")
    # the plans' rows are of the part of the stream they were fitted to (#75)
    assert as_is["eager_requests"] == sum(1 for n in theirs["eager"] if n <= s["fit_requests"])
    # each graph with the request that made it, in the stream's order
    numbers = [c["request"] for c in s["compiles"]]
    assert numbers == sorted(numbers) and numbers[0] == 1
    # the distinct shapes were replayed; the rest, replayed after, compiled nothing
    assert s["replayed"] == s["distinct_shapes"] < s["requests"] and s["repeats_compiled"] == 0
    assert any("compiled nothing: the guards held" in n for n in s["notes"])


def test_the_limit_sends_new_lengths_to_eager_and_the_plan_removes_it() -> None:
    """dynamic=False over twelve lengths: the limit at the 9th new length (request 13), the
    later new lengths eager (a length seen before still runs its graph); the plan chosen
    makes no request eager and fewer graphs, checked under fail_on_recompile."""
    report, _ = shared_json(*RUNS["classifier"])
    s = report["serving"]
    (hit,) = s["limit_hits"]
    lengths = [r["shapes"][0][1] for r in _stream_of_classifier()]
    first_past = [n for n in range(1, len(lengths) + 1) if len(set(lengths[:n])) == 9][0]
    assert hit["request"] == first_past
    seen_before = {
        n
        for n in range(first_past, len(lengths) + 1)
        if lengths[n - 1] in lengths[: first_past - 1]
    }
    assert set(hit["eager_requests"]) == set(range(first_past, len(lengths) + 1)) - seen_before
    plan = s["plan"]
    assert plan["kind"] != "as_is" and plan["eager_requests"] == 0 and plan["graphs"] < s["graphs"]
    assert s["verified"] and s["recompiles_after_warmup"] == 0
    rule = next(r for r in report["verdict"]["rules"] if r["name"] == "max-recompiles-after-warmup")
    assert rule["passed"] and rule["value"] == 0


def _stream_of_classifier() -> list[dict]:
    sys.path.insert(0, str(CLASSIFIER.parent))
    try:
        import padded_classifier  # type: ignore[import-not-found]

        return padded_classifier.get_request_stream()
    finally:
        sys.path.remove(str(CLASSIFIER.parent))


@pytest.mark.parametrize("name", ["classifier", "decoder", "generate"])
def test_the_plan_holds_on_a_stream_kept_apart(name: str, tmp_path: Path) -> None:
    """The plan's code, pasted as it is, then a stream it was not made from (the decoder's
    second draw; for the classifier, other lengths in the same range) served under
    fail_on_recompile: no request raises."""
    report, _ = shared_json(*RUNS[name])
    code = tmp_path / "plan.py"
    code.write_text(report["serving"]["plan"]["code"])
    apart = APART
    if name != "decoder":  # other lengths in the same range: a batch of 4, or one prompt
        batch = 4 if name == "classifier" else 1
        apart = tmp_path / "apart.jsonl"
        lengths = (7, 44, 6, 30, 19, 11, 6) if name == "classifier" else (4, 11, 27, 35, 2, 17)
        apart.write_text("".join(json.dumps({"shapes": [[batch, n]]}) + "\n" for n in lengths))
    # pasted into a fresh script (grad on), the stream served by a caller under no_grad
    # (#75: the warm-up ran with grad on and every request raised): none raises, no graph
    # is made after the warm-up
    theirs = _torch("plan", str(MODELS[name]), str(code), str(apart), "no_grad")
    assert theirs["raised"] == [] and theirs["after_warmup"] == 0, theirs
    assert theirs["graphs"] <= report["serving"]["plan"]["graphs"]
    assert "with torch.inference_mode():" in code.read_text()


def test_the_cold_start_is_measured_in_fresh_processes() -> None:
    """Three fresh processes, each its own pid: empty caches (misses), the same caches again
    (hits), other empty caches with torch's cache artifacts loaded (hits); the warm caches'
    warm-up shorter than the empty caches' one, and the artifacts' too but for the C++
    kernels' build, which Inductor makes again from their source in a fresh cache folder on
    CPU (its own timer, compile_file: 7.6 s of a 9.1 s warm-up with artifacts here, of 10.0 s
    with empty caches; on an H200, 5.30 s with artifacts against 7.90 s, bench/ has it).
    Timed beside another test's load: measured again once where it fails."""
    runs = iter(
        [lambda: shared_json(*RUNS["classifier"])[0], lambda: run_json(*RUNS["classifier"])[0]]
    )

    def check() -> None:
        report = next(runs)()
        s = report["serving"]
        starts = {c["label"]: c for c in s["cold_starts"]}
        assert list(starts) == ["empty caches", "warm caches", "cache artifacts"]
        assert len({c["pid"] for c in starts.values()} | {os.getpid()}) == 4
        assert starts["empty caches"]["cache"].get("graph cache misses", 0) >= 1
        for label in ("warm caches", "cache artifacts"):
            assert starts[label]["cache"].get("graph cache hits", 0) >= 1
            assert "graph cache misses" not in starts[label]["cache"]
        assert "load_cache_artifacts" in s["artifacts"]
        assert s["warm_cache_s"] < s["cold_start_s"]
        empty, artifacts = starts["empty caches"], starts["cache artifacts"]
        cpu = report["environment"]["device"] == "cpu"
        spared = (empty["build_s"] or 0.0) if cpu else 0.0
        rebuilt = (artifacts["build_s"] or 0.0) if cpu else 0.0
        # (within 15%: what the artifacts spare on this small classifier, its graphs' compile,
        # is about the noise beside another test's load: a clean-clone CI run read 3.74 s
        # against 3.67 s, both measurements failing)
        assert artifacts["seconds"] - rebuilt < (empty["seconds"] - spared) * 1.15, starts

    measured_twice(check)


def test_the_section_reads_as_the_figures_say() -> None:
    """The terminal's section from the same report: the limit's request, the plans' rows,
    the verification, the cold start, the code."""
    from compilediag.render.table.report import render_recompiles
    from compilediag.report.model import Report

    data, _ = shared_json(*RUNS["classifier"])
    text = render_recompiles(Report.from_dict(data), width=100)
    s = data["serving"]
    hit = s["limit_hits"][0]
    assert f"hit the recompile limit (8) at request {hit['request']}" in text
    assert "mark_dynamic" in text and "dynamic=True" in text and "as you compile it" in text
    held = s["requests"] - s["fit_requests"]
    assert f"verified: after the warm-up, 0 of the {held} held-out requests would compile" in text
    assert "empty caches" in text and "cache artifacts" in text
    assert 'torch.compiler.set_stance("fail_on_recompile")' in text


def _lines(path: Path) -> list[list]:
    return [json.loads(x)["shapes"] for x in path.read_text().splitlines() if x.strip()]


def test_the_plans_are_checked_on_the_part_of_the_stream_they_were_not_fitted_to(
    tmp_path: Path,
) -> None:
    """#75 (1, 2): the plans are fitted to the decoder stream's first 70% (28 of 40) and
    each that bounds the compiles serves the other 12 in a fresh process; the chosen one's
    count is torch's own (its code pasted, those 12 served under fail_on_recompile). The
    unseen-shape chance is the stream's own count of shapes that came once, and the shapes
    the held-out part brought that the first part had not are counted from the file."""
    report, _ = shared_json(*RUNS["decoder"])
    s = report["serving"]
    stream = _lines(STREAM)
    keys = [json.dumps(r) for r in stream]
    assert s["fit_requests"] == 28 and s["mode"] == "inference_mode"
    u = s["unseen"]
    assert u["once"] == sum(1 for k in keys if keys.count(k) == 1) and u["requests"] == 40
    fit = keys[:28]
    assert u["fit_once"] == sum(1 for k in fit if fit.count(k) == 1)
    assert u["held_out"] == 12 and u["held_out_new"] == sum(1 for k in keys[28:] if k not in fit)
    checked = [p for p in s["plans"] if p["held_out"] is not None]
    assert checked and all(p["held_out"]["requests"] == 12 for p in checked)
    plan = s["plan"]
    assert plan["held_out"]["raised"] == [] and s["verified"]
    assert s["why_plan"].startswith(f"{plan['kind']}: its warm-up held 12 of the 12")
    assert all(max(w) <= 28 for w in [plan["warmup"]] if w)  # fitted to the first part
    held = tmp_path / "held_out.jsonl"
    held.write_text(STREAM.read_text().splitlines(keepends=True)[28:] and
                    "".join(STREAM.read_text().splitlines(keepends=True)[28:]))  # fmt: skip
    code = tmp_path / "plan.py"
    code.write_text(plan["code"])
    theirs = _torch("plan", str(DECODER), str(code), str(held), "grad")
    assert theirs["raised"] == plan["held_out"]["raised"] and theirs["after_warmup"] == 0


def test_padding_is_measured_and_a_model_that_averages_over_it_is_never_bucketed() -> None:
    """#75 (5): the classifier takes a mean over the length with no mask: padded with zeros,
    its outputs change (checked here with torch on one request), so buckets are left out
    and the run says which output changed; the decoder masks its padding: its outputs cut
    back are equal (checked here too), and buckets stay among its plans."""
    import torch

    sys.path.insert(0, str(CLASSIFIER.parent))
    try:
        import padded_classifier as pc  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(CLASSIFIER.parent))
    model, ids = pc.get_model(), torch.randint(1, 100, (4, 5))
    with torch.inference_mode():
        moved = (model(torch.nn.functional.pad(ids, [0, 3])) - model(ids)).abs().max()
    assert moved > 1e-3
    s = shared_json(*RUNS["classifier"])[0]["serving"]
    bucket = next(p for p in s["plans"] if p["kind"] == "bucket")
    assert bucket["padding"]["changed"] >= 1 and bucket["held_out"] is None
    assert s["plan"]["kind"] != "bucket" and "bucket" not in s["bounded"]
    (note,) = [n for n in s["notes"] if n.startswith("buckets are no plan here")]
    assert "output 0 of request" in note and "does not mask its padding" in note
    # the decoder: equal, by torch here on a request padded as the buckets pad it
    sys.path.insert(0, str(DECODER.parent))
    try:
        import decoder  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(DECODER.parent))
    model = decoder.get_model()
    ids, mask = torch.randint(0, 64, (2, 5)), torch.ones(2, 5, dtype=torch.int64)
    with torch.inference_mode():
        padded = model(torch.nn.functional.pad(ids, [0, 3]), torch.nn.functional.pad(mask, [0, 3]))
        torch.testing.assert_close(padded[:, :5], model(ids, mask))
    d = shared_json(*RUNS["decoder"])[0]["serving"]
    bucket = next(p for p in d["plans"] if p["kind"] == "bucket")
    assert bucket["padding"]["requests"] >= 1 and bucket["padding"]["changed"] == 0
    assert "bucket" in d["bounded"]


def test_the_same_stream_gives_the_same_plan() -> None:
    """#75 (7): two runs of the decoder's stream choose the same plan, with the same warm-up,
    by the same counts (Dynamo's own backend: the choice, not Inductor, is the subject)."""
    args = ("recompiles", str(DECODER), "--requests", str(STREAM), "--no-numerics",
            "--no-cold-start", "--backend", "eager")  # fmt: skip
    first, second = (run_json(*args)[0]["serving"] for _ in range(2))
    assert first["plan"]["kind"] == second["plan"]["kind"]
    assert first["plan"]["warmup_shapes"] == second["plan"]["warmup_shapes"]
    assert first["why_plan"] == second["why_plan"] != ""
