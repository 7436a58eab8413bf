"""A job's ranks folded (#29): a real 8-rank recording (tests/fixtures/jobs/eight_ranks.py,
2.13, 8 gloo ranks, rank 5 alone breaks), each rank's findings checked against that rank's
own report and the graph counts against torch's CompileCounter on the same model; and
1,024 ranks of real traces, one of them different, on one screen."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from tests.conftest import ROOT, TRACES, run_cli, run_json

EIGHT = TRACES / "torch-2.13.0-cpu" / "eight_ranks"
JOB = ROOT / "tests" / "fixtures" / "jobs" / "eight_ranks.py"


def torch_graphs(rank: int) -> int:
    """The graphs torch compiles for the job's model on `rank` (CompileCounter, same
    batches), in this process: the job's Model class, with RANK set."""
    torch = pytest.importorskip("torch")
    from torch._dynamo.testing import CompileCounter

    tree = ast.parse(JOB.read_text())
    model = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model")
    namespace = {"torch": torch, "nn": torch.nn, "RANK": rank}
    exec(compile(ast.Module([model], []), str(JOB), "exec"), namespace)
    counter = CompileCounter()
    torch._dynamo.reset()
    compiled = torch.compile(namespace["Model"](), backend=counter)
    for batch in (8, 8, 4):
        compiled(torch.randn(batch, 16))
    torch._dynamo.reset()
    return counter.frame_count


def test_eight_ranks_fold_into_the_ranks_that_compiled_alike() -> None:
    report, proc = run_json("report", str(EIGHT), "--fail-on-divergence")
    assert proc.returncode == 1  # rank 5 diverges
    ranks = report["ranks"]
    assert [r["rank"] for r in ranks] == list(range(8))
    groups = [[ranks[i]["rank"] for i in g["ranks"]] for g in report["rank_groups"]]
    assert groups == [[0, 1, 2, 3, 4, 6, 7], [5]]
    # each rank's graphs are torch's count for that rank
    assert [r["summary"]["graphs"] for r in ranks] == [torch_graphs(0)] * 5 + [torch_graphs(5)] + [
        torch_graphs(0)
    ] * 2
    # every finding is shown once, with the ranks that have it, and is what each of those
    # ranks' own report holds
    for n, f in enumerate(sorted(EIGHT.iterdir())):
        own, _ = run_json("report", str(f))
        mine = lambda items, n=n: [x for x in items if n in x["ranks"]]  # noqa: E731
        assert sorted(
            (b["file"], b["line"], b["reason"]) for b in mine(report["graph_breaks"])
        ) == (sorted((b["file"], b["line"], b["reason"]) for b in own["graph_breaks"]))
        assert sorted(r["failed_guard"] for r in mine(report["recompiles"])) == sorted(
            r["failed_guard"] for r in own["recompiles"]
        )
    (b,) = report["graph_breaks"]
    assert (Path(b["file"]).name, [ranks[i]["rank"] for i in b["ranks"]]) == ("eight_ranks.py", [5])
    shared = [r for r in report["recompiles"] if len(r["ranks"]) == 8]
    assert len(shared) == 1, "the recompile every rank made is shown once"
    table = run_cli("report", str(EIGHT)).stdout
    first = next(line for line in table.splitlines() if line.startswith("!"))
    assert first.startswith("! ranks diverge: rank 5 compiled unlike the other 7 ranks")
    assert "all but rank 5" in table and "Ranks (8, 2 groups that compiled alike)" in table


@pytest.fixture(scope="module")
def thousand(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """1,024 rank files of one real trace (2.13's recompile job), rank 700 another real one
    (the print_break job)."""
    folder = tmp_path_factory.mktemp("ranks")
    same = TRACES / "torch-2.13.0-cpu" / "recompile.log"
    odd = TRACES / "torch-2.13.0-cpu" / "print_break.log"
    for n in range(1024):
        (folder / f"dedicated_log_torch_trace_rank_{n}_x.log").symlink_to(odd if n == 700 else same)
    return folder


def test_a_thousand_ranks_fit_on_a_screen_and_the_odd_rank_leads(thousand: Path) -> None:
    table = run_cli("report", str(thousand))
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert len(lines) <= 100, len(lines)
    # the first finding, right under the headline
    first = next(i for i, line in enumerate(lines) if line.startswith("!"))
    assert first <= 4 and "1024 ranks" in " ".join(lines[:first])
    assert lines[first].startswith("! ranks diverge: rank 700 compiled unlike the other 1023")
    gated = run_cli("report", str(thousand), "--fail-on-divergence")
    assert gated.returncode == 1
    report = json.loads(run_cli("report", str(thousand), "--format", "json").stdout)
    assert len(report["ranks"]) == 1024  # each rank's own figures are kept
    assert [len(g["ranks"]) for g in report["rank_groups"]] == [1023, 1]
    assert any(
        d["kind"] == "rank_breaks" and d["message"].startswith("only rank 700 breaks at")
        for d in report["divergence"]
    )
    own, _ = run_json("report", str(TRACES / "torch-2.13.0-cpu" / "recompile.log"))
    # the findings of the 1,023 are one rank's, once
    assert len(report["recompiles"]) == len(own["recompiles"])
    assert {r["failed_guard"] for r in report["recompiles"]} == {
        r["failed_guard"] for r in own["recompiles"]
    }


def test_digests_saved_on_two_machines_fold_into_the_whole_jobs_report(tmp_path: Path) -> None:
    """Each machine's ranks (here: ranks 0-3 and 4-7 of the 8-rank recording, in two
    folders) saved with --save-digests, then one `report` on both files: the report of the
    whole folder."""
    for name, ranks in (("a", range(4)), ("b", range(4, 8))):
        (tmp_path / name).mkdir()
        for f in EIGHT.iterdir():
            if any(f"_rank_{n}_" in f.name for n in ranks):
                (tmp_path / name / f.name).symlink_to(f)
        saved = run_cli(
            "report", str(tmp_path / name), "--save-digests", str(tmp_path / f"{name}.json")
        )
        assert saved.returncode == 0, saved.stderr
        assert f"wrote {tmp_path / name}.json (digests of 4 rank(s))" in saved.stderr
    merged, proc = run_json("report", str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    whole, _ = run_json("report", str(EIGHT))
    for key in ("summary", "rank_groups", "divergence"):
        assert merged[key] == whole[key], key
    assert [r["rank"] for r in merged["ranks"]] == list(range(8))
    site = lambda r: [(b["file"], b["line"], b["count"], b["ranks"]) for b in r["graph_breaks"]]  # noqa: E731
    assert site(merged) == site(whole)
    # a digest file of another version is refused in one line
    data = json.loads((tmp_path / "a.json").read_text())
    data["version"] = 99
    (tmp_path / "old.json").write_text(json.dumps(data))
    bad = run_cli("report", str(tmp_path / "old.json"))
    assert bad.returncode == 2 and "digest file can't be read" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_a_note_every_rank_raises_is_said_once_with_its_ranks() -> None:
    """#76 (6): nanoGPT's DDP job on 2 H200s (torch 2.11), rank 0 evaluating: the ranks
    compiled apart (two groups), and each rank's run has no Inductor provenance records, its
    own count of kernels without a user line (47 and 38). Said once, with the ranks, and
    whose counts they are; before, once a group."""
    report, proc = run_json("report", str(TRACES / "torch-2.11.0-cuda" / "nccl_gpt_eval"))
    assert proc.returncode == 0, proc.stderr
    assert len(report["rank_groups"]) == 2
    (note,) = [n for n in report["notes"] if n["kind"] == "no_provenance"]
    assert note["message"].endswith("(so say all 2 ranks; the counts are those of rank 0)")
    first = [r for r in report["ranks"] if r["rank"] == 0]
    assert first and f"of {first[0]['summary']['kernels']} generated kernels" in note["message"]
