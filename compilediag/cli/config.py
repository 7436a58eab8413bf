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
    fail_on_mismatch = true
    baseline = "compilediag-baseline.json"

Command-line options win over the file. The keys are declared with what they set: a run
option's in cli_options.RunOptions, a gate rule's in gate.GATE_RULES.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from compilediag.cli.options import RUN_CONFIG_KEYS, RunOptions
from compilediag.errors import UsageError
from compilediag.gate import GATE_RULES


@dataclass
class Config:
    path: str | None = None  # the pyproject.toml it came from
    run: dict[str, object] = field(default_factory=dict)  # a RunOptions field -> its value
    shapes: str | None = None
    baseline: str | None = None
    limits: dict[str, object] = field(default_factory=dict)  # a key of each gate rule

    def fill(self, run: RunOptions) -> RunOptions:
        """The command line's run options, with the file's value where it gave none."""
        unset = {k: v for k, v in self.run.items() if getattr(run, k) in (None, [])}
        return replace(run, **unset)  # type: ignore[arg-type]  # checked by _KINDS on load


# what each key holds, in words for the error message: a run option's and a gate rule's as
# their declarations say
# a gate rule's key before it was renamed, still taken
FORMER_KEYS = {r.former: r.key for r in GATE_RULES if r.former}
_KINDS: dict[str, tuple[tuple[type, ...], str]] = {
    **{
        f.metadata["config"][0]: f.metadata["config"][1:]
        for f in fields(RunOptions)
        if f.metadata["config"]
    },
    "shapes": ((str,), 'a string like "2x16,4x16"'),
    "baseline": ((str,), "a path string"),
    **{r.key: ((int, float) if r.kind is float else (r.kind,), r.words) for r in GATE_RULES},
}


_LIMITS = {r.key for r in GATE_RULES if r.kind is not bool}  # budgets and floors: 0 or more


def _check_type(key: str, value: object, pyproject: Path) -> None:
    kinds, words = _KINDS[key]
    # TOML booleans are ints to Python: a count or a speed-up must not be `true`
    ok = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)
    if key == "inputs" and isinstance(value, list):
        ok = all(isinstance(v, str) for v in value)
    if key in _LIMITS and ok and not isinstance(value, bool) and value < 0:  # type: ignore[operator]
        ok = False
    if not ok:
        raise UsageError(
            f"[tool.compilediag] {key} = {value!r} in {pyproject} is not {words}.",
            hint=f"Fix the value of `{key}` in that file.",
        )


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
    table = {FORMER_KEYS.get(k, k): v for k, v in table.items()}
    known = set(_KINDS)
    unknown = sorted(set(table) - known)
    if unknown:
        raise UsageError(
            f"[tool.compilediag] in {pyproject} has unknown keys: {', '.join(unknown)}.",
            hint=f"Known keys: {', '.join(sorted(known))}.",
        )
    for key, value in table.items():
        _check_type(key, value, pyproject)
    gate = {r.key for r in GATE_RULES}
    cfg = Config(
        path=str(pyproject),
        run={RUN_CONFIG_KEYS[k]: v for k, v in table.items() if k in RUN_CONFIG_KEYS},
        limits={k: v for k, v in table.items() if k in gate},
        **{k: v for k, v in table.items() if k not in gate and k not in RUN_CONFIG_KEYS},
    )
    base = pyproject.parent
    # paths in the file are relative to it, not to wherever the command runs
    model = cfg.run.get("target")
    if isinstance(model, str):
        path, sep, attr = model.rpartition(":") if ":" in model else (model, "", "")
        cfg.run["target"] = str(base / path) + (sep + attr if sep else "")
    if cfg.baseline:
        cfg.baseline = str(base / cfg.baseline)
    if isinstance(cfg.run.get("inputs"), str):
        cfg.run["inputs"] = [cfg.run["inputs"]]
    return cfg
