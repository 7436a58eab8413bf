"""`[tool.compilediag]` in pyproject.toml: the model, its inputs and the gate, so that
`compilediag explain` with no arguments works in a configured repository.

    [tool.compilediag]
    model = "models/net.py:Net"       # relative to the pyproject.toml
    inputs = ["8x16"]                 # like --input
    shapes = "2x16,4x16"              # like --shapes (recompiles)
    backend = "inductor"
    device = "cpu"
    fullgraph = true
    max_graph_breaks = 0
    max_recompiles = 1
    min_speedup = 1.1
    check_outputs = true
    baseline = "compilediag-baseline.json"

Command-line options win over the file.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path

from compilediag.errors import UsageError


@dataclass
class Config:
    path: str | None = None  # the pyproject.toml it came from
    model: str | None = None
    inputs: list[str] = field(default_factory=list)
    shapes: str | None = None
    backend: str | None = None
    device: str | None = None
    mode: str | None = None
    fullgraph: bool = False
    max_graph_breaks: int | None = None
    max_recompiles: int | None = None
    min_speedup: float | None = None
    check_outputs: bool = False
    baseline: str | None = None


def find_pyproject(start: Path) -> Path | None:
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def load_config(start: Path | None = None) -> Config:
    pyproject = find_pyproject((start or Path.cwd()).resolve())
    if pyproject is None:
        return Config()
    try:
        data = tomllib.loads(pyproject.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise UsageError(f"{pyproject} is not valid TOML: {e}.") from None
    table = data.get("tool", {}).get("compilediag")
    if not table:
        return Config()
    known = {f.name for f in fields(Config)} - {"path"}
    unknown = sorted(set(table) - known)
    if unknown:
        raise UsageError(
            f"[tool.compilediag] in {pyproject} has unknown keys: {', '.join(unknown)}.",
            hint=f"Known keys: {', '.join(sorted(known))}.",
        )
    cfg = Config(path=str(pyproject), **table)
    base = pyproject.parent
    # paths in the file are relative to it, not to wherever the command runs
    if cfg.model:
        path, sep, attr = cfg.model.rpartition(":") if ":" in cfg.model else (cfg.model, "", "")
        cfg.model = str(base / path) + (sep + attr if sep else "")
    if cfg.baseline:
        cfg.baseline = str(base / cfg.baseline)
    if isinstance(cfg.inputs, str):
        cfg.inputs = [cfg.inputs]
    return cfg
