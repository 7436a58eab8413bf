"""The request stream read and checked before a run, and the plans proposed from its
shapes (no torch): a bad line named with its number and the fix, exit 2 before any worker;
the dimensions that vary and their range; buckets within BUCKETS and their padding counted
element by element."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from compilediag.errors import UsageError
from compilediag.harness.serving.plans import (
    BUCKETS,
    best_sizes,
    bucket_of,
    full,
    padded,
    propose,
    varying_dims,
)
from compilediag.harness.serving.stream import distinct, read_requests
from tests.conftest import ROOT, run_cli

DECODER = ROOT / "tests" / "fixtures" / "serving" / "decoder.py"


def _write(tmp_path: Path, lines: list[str], name: str = "requests.jsonl") -> str:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_a_stream_is_read_in_order_with_its_distinct_requests(tmp_path: Path) -> None:
    path = _write(tmp_path, [
        '{"shapes": [[1, 5], [1, 5]]}', "", '{"shapes": [[2, 9], null]}', '{"shapes": [[1, 5], [1, 5]]}',
    ])  # fmt: skip
    stream = read_requests(path)
    assert stream == [[[1, 5], [1, 5]], [[2, 9], None], [[1, 5], [1, 5]]]
    assert distinct(stream) == [0, 1]


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("{not json", "line 2: not JSON"),
        ('{"shape": [[1, 5]]}', "line 2: a request is an object with a list of shapes"),
        ('{"shapes": [[1, -5]]}', "line 2: shape [1, -5] is not a list of sizes"),
        ('{"shapes": [[1, 2.5]]}', "line 2: shape [1, 2.5] is not a list of sizes"),
    ],
)
def test_a_bad_line_is_named_with_its_number(tmp_path: Path, line: str, said: str) -> None:
    path = _write(tmp_path, ['{"shapes": [[1, 5]]}', line])
    with pytest.raises(UsageError) as e:
        read_requests(path)
    assert said in e.value.message


def test_a_bad_stream_exits_2_before_any_worker(tmp_path: Path) -> None:
    """The CLI's answer: one paragraph, exit 2, no traceback; and a sweep beside a stream,
    or the serving gate without one, refused the same way."""
    bad = _write(tmp_path, ['{"shapes": [[1, 5]]}', "{oops"])
    cases = [
        (["--requests", bad], "line 2: not JSON"),
        (["--requests", str(tmp_path / "none.jsonl")], "no such file"),
        (["--requests", _write(tmp_path, ['{"shapes": [[1, 5]]}'], "one.jsonl"), "--shapes", "2x8,4x8"],
         "--shapes and --requests both given"),
        # the mask kept at get_inputs()'s 1x8 beside ids of 1x5: the request, not the model
        (["--requests", _write(tmp_path, ['{"shapes": [[1, 8]]}', '{"shapes": [[1, 5]]}'], "two.jsonl"),
          "--backend", "eager", "--no-cold-start"],
         "request 2 (1x5:int64, 1x8:int64) does not fit the model"),
        (["--max-recompiles-after-warmup", "0", "--input", "1x8:int64:64", "--input", "1x8:int64:2"],
         "judges a request stream"),
    ]  # fmt: skip
    for args, said in cases:
        proc = run_cli("recompiles", str(DECODER), *args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert said in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


STREAM = [
    [[1, 5], [1, 5]],
    [[2, 9], [2, 9]],
    [[4, 30], [4, 30]],
    [[1, 7], None],
    [[1, 63], [1, 63]],
]
BASE = [[1, 8], [1, 8]]


def test_the_dimensions_that_vary_with_their_range() -> None:
    dims = [(x.input, x.dim, x.low, x.high) for x in varying_dims(STREAM, BASE)]
    # the second tensor keeps get_inputs()'s 1x8 in the fourth request
    assert dims == [(0, 0, 1, 4), (0, 1, 5, 63), (1, 0, 1, 4), (1, 1, 5, 63)]


def test_buckets_stay_within_their_bound_and_their_padding_is_counted() -> None:
    plans = {p.kind: p for p in propose(STREAM, BASE)}
    assert list(plans) == ["mark_dynamic", "bucket", "dynamic"]
    bucket = plans["bucket"]
    shapes = {json.dumps(padded(r, BASE, bucket.dims)) for r in STREAM}
    assert len(shapes) <= BUCKETS
    for r in STREAM:  # each padded size one of the dimension's buckets, never smaller
        for x in bucket.dims:
            n, m = full(r, BASE)[x.input][x.dim], padded(r, BASE, bucket.dims)[x.input][x.dim]
            assert m >= n and m in x.sizes and x.sizes[-1] == x.high
    # the warm-up covers every padded shape of the stream, the ids and their mask alike
    warm = {json.dumps(w) for w in bucket.warmup_shapes}
    assert shapes <= warm and all(w[0] == w[1] for w in bucket.warmup_shapes)
    real = sum(math.prod(s) for r in STREAM for s in full(r, BASE))
    pad = sum(math.prod(s) for r in STREAM for s in padded(r, BASE, bucket.dims))
    assert bucket.padding_share == pytest.approx(pad / real - 1, abs=1e-4)


def test_no_plan_where_nothing_varies() -> None:
    assert propose([[[1, 8]], [[1, 8]]], [[1, 8]]) == []


def test_bucket_sizes_are_the_least_padding_for_their_count_and_the_trade_off_falls() -> None:
    """#75 (4): each count of buckets pads the least work any split of the sizes can (every
    split of the lengths into 2 tried by hand), the padded work falls as the count grows,
    the chosen list is the trade-off's row within BUCKETS; --max-shape's top is the largest
    bucket though the stream never reached it."""
    import itertools

    lengths = [3, 3, 5, 9, 9, 9, 20, 38]
    two = best_sizes(lengths, 2, 38)

    def cost(sizes: list[int]) -> int:
        return sum(min(s for s in sizes if s >= n) for n in lengths)

    every = [[a, 38] for a in sorted(set(lengths)) if a < 38]
    assert cost(two) == min(cost(x) for x in every) and two[-1] == 38
    assert best_sizes(lengths, 1, 64) == [64]
    stream = [[[b, n], [b, n]] for b, n in itertools.product((1, 2, 4), lengths)]
    bucket = propose(stream, BASE)[1]
    shares = [o.padding_share for o in bucket.options]
    assert shares == sorted(shares, reverse=True) and len(bucket.options) >= 4
    kept = next(o for o in bucket.options if [x.sizes for x in bucket.dims][:2] == o.sizes)
    assert kept.buckets <= BUCKETS and kept.padding_share == bucket.padding_share
    top = propose(stream, BASE, [8, 128])[1]
    assert [x.sizes[-1] for x in top.dims] == [8, 128, 8, 128]
    assert bucket_of(129, top.dims[1].sizes) is None  # above it: the plan runs it eager


def test_a_request_that_names_fewer_tensors_than_the_call_is_said() -> None:
    """#76 (7): a request of one shape for a call of two tensors keeps the second at
    get_inputs()'s shape, as the format says; the run says which requests did, and how to
    say it on purpose (null)."""
    from compilediag.analysis.serving.forecast import _notes
    from compilediag.harness.serving.facts import ServingFacts
    from compilediag.report.serving import Serving

    stream = [[[1, 5], [1, 5]], [[2, 9]], [[1, 7], None], [[4, 3]]]
    facts = ServingFacts(stream=stream, base=BASE, names=["input_ids", "attention_mask"])
    (note,) = _notes(Serving(requests=4, replayed=4), facts)
    assert note.startswith("2 of 4 requests (2, 4) gave fewer shapes than the call's 2 tensors")
    assert "input_ids 1x8, attention_mask 1x8" in note and "null" in note


def test_the_models_own_bound_on_a_requests_length_is_said() -> None:
    """#75 (3): transformers' BERT from its config holds 512 positions
    (bert.embeddings.position_embeddings): said beside the stream's longest size, and a
    --max-shape past it said as past it."""
    import torch
    from transformers import BertConfig, BertModel

    from compilediag.analysis.serving.forecast import _notes
    from compilediag.harness.serving.facts import ServingFacts
    from compilediag.harness.serving.replay import position_tables
    from compilediag.report.serving import Serving

    config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=40)  # fmt: skip
    tables = position_tables(torch, BertModel(config))
    assert tables == {"embeddings.position_embeddings": 40}
    facts = ServingFacts(stream=STREAM, base=BASE, positions=tables, most=[8, 64])
    (note,) = [n for n in _notes(Serving(requests=5, replayed=5), facts) if "own bound" in n]
    assert "embeddings.position_embeddings holds 40 positions" in note
    assert "longest size past the batch: 63" in note and "--max-shape asks for 64, past it" in note
