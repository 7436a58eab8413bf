"""The ranks of a job as the report gives them: a set of ranks in a few words (`rank 3`,
`ranks 0-15, 17-63`, `all 64 ranks`, `all but rank 17`: one home for the wording every
renderer and the divergence list use), and each rank's label."""

from __future__ import annotations

import os
from collections import Counter

from compilediag.report.model import RankSummary

LISTED = 6  # names beyond this many are counted, not listed


def rank_set(ranks: list[RankSummary], members: list[int]) -> str:
    """`members`: positions in `ranks` (a report's ranks[])."""
    total = len(ranks)
    chosen = sorted(set(members))
    if total > 1 and len(chosen) == total:
        return f"all {total} ranks"
    numbers = [ranks[i].rank for i in chosen]
    unique = len({r.rank for r in ranks}) == total and None not in numbers
    if unique and total >= 8 and total - len(chosen) <= 2:
        rest = [i for i in range(total) if i not in set(chosen)]
        return "all but " + rank_set(ranks, rest)
    if unique:
        spans = _spans(sorted(n for n in numbers if n is not None))
        word = "rank" if len(chosen) == 1 else "ranks"
        shown = ", ".join(spans[:LISTED])
        more = f" and {len(spans) - LISTED} more" if len(spans) > LISTED else ""
        return f"{word} {shown}{more}"
    labels = [ranks[i].label or ranks[i].file for i in chosen]
    more = f" and {len(labels) - LISTED} more" if len(labels) > LISTED else ""
    return ", ".join(labels[:LISTED]) + more


def _spans(numbers: list[int]) -> list[str]:
    out: list[str] = []
    start = prev = None
    for n in numbers:
        if start is not None and prev is not None and n == prev + 1:
            prev = n
            continue
        if start is not None:
            out.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = n
    if start is not None:
        out.append(str(start) if start == prev else f"{start}-{prev}")
    return out


def label_ranks(ranks: list[RankSummary]) -> None:
    """`rank 3`; a rank two files claim (or none claims) is told apart by its file."""
    seen = Counter(r.rank for r in ranks)
    for r in ranks:
        name = os.path.basename(r.file)
        r.label = f"rank {r.rank}" if r.rank is not None and seen[r.rank] == 1 else (
            f"rank {r.rank} ({name})" if r.rank is not None else name
        )  # fmt: skip
