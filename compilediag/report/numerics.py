"""Compiled against eager, and both against a float64 reference (`numerics` in the JSON):
whether they agree, which is the closer where they don't, random numbers and rounding told
apart from a bug, and for a bug the backend stage, the first op that departs, the custom
ops' own checks and a repro that runs alone. No torch here."""

from __future__ import annotations

from dataclasses import dataclass, field

# a verdict, from the quietest: outputs agree within the float64-derived tolerance; compiled
# is the nearer to float64 (eager's rounding is the difference); they differ by random
# numbers only; they differ (a bug, or an order of operations torch does not promise)
MATCH, COMPILED_CLOSER, RANDOM_ONLY, DIFFER = "match", "compiled_closer", "random_only", "differ"
NOT_COMPARED = "not_compared"  # the compile failed: only the custom ops were checked
PASSING = frozenset({MATCH, COMPILED_CLOSER, RANDOM_ONLY})
STAGES = ("aot_eager", "aot_eager_decomp_partition", "inductor")  # after eager, in order


@dataclass
class OutputCloseness:
    """One output tensor: its max abs distances over the positions where both sides are
    finite, and the tolerance compiled is held to (None: not measured)."""

    name: str  # out[0], out[1], ...
    dtype: str
    shape: list[int]
    compiled_vs_eager: float | None = None
    eager_vs_float64: float | None = None
    compiled_vs_float64: float | None = None
    # how far compiled may stand from float64: twice eager's own distance, or the dtype's
    # rounding at the values' scale, whichever is more (tolerance_from says which way)
    tolerance: float | None = None
    nonfinite: str = ""  # e.g. "compiled has 4 NaN where eager is finite"
    verdict: str = MATCH


@dataclass
class NodeSite:
    """An op of a captured graph, at the user's line."""

    graph: int  # the graph's index in the order the run compiled them
    node: str  # the FX node's name
    op: str  # aten.sinh, numdemo.scale_rows, operator.mul
    file: str = ""
    line: int = 0
    code: str = ""
    compiled_vs_eager: float | None = None
    tolerance: float | None = None
    makes: str = ""  # "inf" / "NaN": a value eager does not make there
    kernel: str = ""  # the Inductor kernel that computes it (from the run's own kernels)
    inputs_agree: bool = True


@dataclass
class RandomOp:
    op: str  # aten.bernoulli_, aten.randn
    file: str = ""
    line: int = 0
    code: str = ""
    calls: int = 0


@dataclass
class OpCheck:
    """torch.library.opcheck on a custom op of the graph, with the inputs the run gave it."""

    op: str
    test: str = ""  # the failing check: test_schema, test_faketensor, ...
    cause: str = ""  # in words: "mutates an input it does not declare"
    message: str = ""  # torch's first line


@dataclass
class Numerics:
    verdict: str = MATCH
    words: str = ""  # the verdict in one sentence
    tolerance_from: str = ""  # "float64 reference" / "dtype" (and why)
    outputs: list[OutputCloseness] = field(default_factory=list)
    random_ops: list[RandomOp] = field(default_factory=list)
    # with torch._inductor.config.fallback_random and one seed: "match" / "differ" ("": not run)
    random_rerun: str = ""
    stage: str = ""  # the first backend stage whose output departs from eager
    bisector: str = ""  # torch's CompilerBisector: subsystem and pass or lowering number
    first_node: NodeSite | None = None  # the first op whose output departs, inputs agreeing
    first_nonfinite: NodeSite | None = None  # the first op making a NaN/inf eager does not
    eager_nonfinite: NodeSite | None = None  # the first op where eager makes one float64 does not
    opcheck: list[OpCheck] = field(default_factory=list)
    repro: str = ""  # repro_<graph>.py, runs alone
    setting: str = ""  # the setting that makes compiled do as eager (rounding, random numbers)
    searched_s: float = 0.0  # what the search for a cause cost (0: no difference to search)
    notes: list[str] = field(default_factory=list)  # what could not be done, and why


@dataclass
class LossCheck:
    """run --check-numerics: the job's losses, step by step, against the same seeded steps
    run eagerly (twice: eager's own run-to-run spread is the yardstick)."""

    steps: int = 0  # the steps all three runs logged a loss for
    first_step: int | None = None  # the first step where compiled parts from eager (None: none)
    compiled: float | None = None  # the losses at that step (else at the widest gap)
    eager: float | None = None
    gap: float = 0.0  # |compiled - eager| there, as a share of eager's loss
    spread: float = 0.0  # eager's own runs' widest difference up to there, as a share
    tolerance: float = 0.0  # the share a step may differ by: 3 x spread, at least FLOOR
    words: str = ""
    # why they part, from a run with Inductor's random numbers as eager's: "random" (then
    # they follow eager), "op" (they part still); "" where they do not part
    cause: str = ""
