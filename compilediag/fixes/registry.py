"""torch's graph_break_registry.json: its entries, hints as the floor fix, its
explanation templates to recognise a break by (read without importing torch)."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from compilediag.fixes.model import RULES, Fix, Source
from compilediag.report.vocabulary import BreakCause

# --- torch's registry -----------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One entry of torch's graph_break_registry.json."""

    gb_id: str
    gb_type: str
    explanation: str
    hints: tuple[str, ...]


def registry_path() -> Path | None:
    """torch/_dynamo/graph_break_registry.json of the installed torch (torch not imported)."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder) / "_dynamo" / "graph_break_registry.json"
        if path.is_file():
            return path
    return None


@functools.lru_cache(maxsize=1)
def registry() -> dict[str, list[Entry]]:
    """GB id -> its entries (a GB id may have several: the same break raised at several
    places); empty where torch is not installed or ships no registry (before 2.8)."""
    path = registry_path()
    if path is None:
        return {}
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    out: dict[str, list[Entry]] = {}
    for gb_id, entries in raw.items():
        for e in entries if isinstance(entries, list) else []:
            out.setdefault(gb_id, []).append(
                Entry(
                    gb_id,
                    str(e.get("Gb_type", "")),
                    str(e.get("Explanation", "")),
                    tuple(join_hints(e.get("Hints") or [])),
                )
            )
    return out


@functools.lru_cache(maxsize=1)
def registry_types() -> dict[str, list[str]]:
    """gb_type -> the GB ids that carry it (registry, then compilediag's own rules)."""
    out: dict[str, list[str]] = {}
    for gb_id, entries in registry().items():
        for e in entries:
            ids = out.setdefault(e.gb_type, [])
            if gb_id not in ids:
                ids.append(gb_id)
    for gb_id, rule in RULES.items():
        for t in rule.gb_types:
            ids = out.setdefault(t, [])
            if gb_id not in ids:
                ids.append(gb_id)
    return out


def join_hints(fragments: Iterable[str]) -> list[str]:
    """The registry splits a hint written as adjacent string literals into its pieces
    (`"Set ... = True "`, `"or export ..."`); torch prints them as one. A piece that ends
    or starts with a space continues the hint before it."""
    hints: list[str] = []
    glue = False
    for frag in fragments:
        frag = str(frag)
        if hints and (glue or frag[:1].isspace()):
            hints[-1] = hints[-1].rstrip() + " " + frag.strip()
        else:
            hints.append(frag.strip())
        glue = frag[-1:].isspace()
    return [h for h in hints if h]


# placeholders of the registry's texts: `{fn.__name__}`, `{self.value}`
_PLACEHOLDER = re.compile(r"\{[^{}]*\}")
BOILERPLATE = re.compile(
    r"^(It may be possible to write Dynamo tracing rules|Please report an issue to PyTorch"
    r"|Please file an issue|File an issue to PyTorch|Report an issue to PyTorch"
    r"|This graph break may have been caused by an earlier graph break)",
    re.I,
)


def fill(text: str) -> str:
    return _PLACEHOLDER.sub("…", text)


@functools.lru_cache(maxsize=1)
def _explanation_patterns() -> list[tuple[re.Pattern[str], int, str]]:
    """(pattern, literal length, GB id) for each registry explanation with enough words
    to recognise it by (`explanation` or `msg` are names of variables, not texts)."""
    out = []
    for gb_id, entries in registry().items():
        for e in entries:
            parts = _PLACEHOLDER.split(e.explanation)
            literal = sum(len(p.strip()) for p in parts)
            if literal < 20 or " " not in e.explanation:
                continue
            body = ".*?".join(re.escape(p) for p in parts)
            out.append((re.compile(body, re.S), literal, gb_id))
    return out


def ids_for_explanation(explanation: str) -> list[str]:
    """The GB id whose explanation template matches torch's explanation text; none when
    the best match is shared by several ids."""
    text = explanation.strip()
    if not text:
        return []
    best: dict[str, int] = {}
    for pattern, literal, gb_id in _explanation_patterns():
        if pattern.match(text):
            best[gb_id] = max(best.get(gb_id, 0), literal)
    if not best:
        return []
    top = max(best.values())
    ids = [i for i, n in best.items() if n == top]
    return ids if len(ids) == 1 else []


UNCHECKED = "torch's hint; compilediag has not checked it"


def floor_fix(gb_id: str | None, hints: Sequence[str]) -> Fix | None:
    """torch's own hints as the fix: the break's own (filled in), else the registry's."""
    known = gb_id is not None and gb_id in registry()
    useful = [h for h in hints if h and not BOILERPLATE.match(h)]
    if not useful and gb_id is not None and known:
        every = dict.fromkeys(h for e in registry()[gb_id] for h in e.hints)
        useful = [fill(h) for h in every if not BOILERPLATE.match(h)]
    source = Source.TORCH_REGISTRY if known else Source.TORCH_HINTS
    if useful:
        text = " ".join(h if h.endswith((".", "`", ")")) else h + "." for h in useful)
    elif known:
        text = (
            "torch has no fix for this break beyond reporting it: keep this code out of the "
            "compiled region (call it before or after the compiled function)."
        )
    else:
        return None
    return Fix(BreakCause.OTHER, text, UNCHECKED, source=source, gb_id=gb_id)
