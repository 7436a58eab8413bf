"""An explanation said once in the table: a fix without the sentences an earlier fix gave
whole, referred to instead (#62)."""

from __future__ import annotations

import re

SENTENCE = re.compile(r"(?<=[.:])\s+(?=[A-Z(`])")


def unsaid(fix: str, said: dict[str, str], cid: str) -> str:
    """A fix without the sentences an earlier fix gave whole (an explanation of 120 words
    said for each frame that switched modes): `as for 0/1 above; ` and what is its own.
    `said` is added to."""
    parts = SENTENCE.split(fix)
    earlier = [said[x] for x in parts if x in said and said[x] != cid]
    own = [x for x in parts if x not in said or said[x] == cid]
    for x in parts:
        said.setdefault(x, cid)
    if not earlier or not own:
        return fix
    rest = " ".join(own)
    return f"as for {shown_id_of(earlier[0])} above; {rest[:1].lower()}{rest[1:]}"


def shown_id_of(cid: str) -> str:
    return cid.rpartition(":")[2] or cid
