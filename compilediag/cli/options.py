"""The options the commands share, as typer annotations: how to run a model, each declared
once in RunOptions (its option, its key in [tool.compilediag]), and the gate's options,
one per rule of gate.GATE_RULES. No torch, nothing heavy (fast --help)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from compilediag.gate import GateRule

KEYWORD = inspect.Parameter.KEYWORD_ONLY

# What a step of `--profile-steps` (and of capture(profile_steps=...)) is, in the words its
# help, its errors and capture()'s docstring all use
STEPS_ARE = "the job's optimizer steps; without one, calls of the first compiled model or function"

# --- options shared by the commands that run a model ----------------------------------

Target = Annotated[
    str,
    typer.Argument(
        help="Model file, PATH.py or PATH.py:ATTR.", show_default=False, metavar="MODEL"
    ),
]
OptionalTarget = Annotated[
    str | None,
    typer.Argument(
        help="Model file, PATH.py or PATH.py:ATTR (default: `model` in [tool.compilediag] of pyproject.toml).",
        show_default=False,
        metavar="MODEL",
    ),
]
Inputs = Annotated[
    list[str] | None,
    typer.Option(
        "--input",
        "-i",
        metavar="SPEC",
        help="An input tensor SHAPE[:DTYPE[:HIGH]], e.g. 8x16 or 2x128:int64:30522. Repeat for more arguments.",
    ),
]
Backend = Annotated[
    str | None,
    typer.Option(
        "--backend",
        help="torch.compile backend: inductor, aot_eager, eager, ...",
        show_default=False,
        metavar="NAME",
    ),
]
Baseline = Annotated[
    str | None,
    typer.Option(
        "--baseline",
        help="Gate: a report saved with --format json; exit 1 only on a regression against it.",
        metavar="FILE",
    ),
]
SpeedupTolerance = Annotated[
    float,
    typer.Option(
        "--speedup-tolerance",
        help="With --baseline: how far (fraction) the speed-up may drop.",
        metavar="F",
    ),
]
Junit = Annotated[
    str | None,
    typer.Option(
        "--junit",
        help="Also write a JUnit XML report (a test case per rule and site).",
        metavar="FILE",
    ),
]
Mode = Annotated[
    str | None,
    typer.Option(
        "--mode",
        help="torch.compile mode: default, reduce-overhead, max-autotune, max-autotune-no-cudagraphs.",
        metavar="MODE",
    ),
]
Dynamic = Annotated[
    bool | None,
    typer.Option(
        "--dynamic/--no-dynamic",
        help="Pass dynamic=True/False to torch.compile (default: torch's automatic dynamic).",
    ),
]
Device = Annotated[
    str | None,
    typer.Option("--device", help="cpu or cuda (default: cuda if available).", metavar="DEVICE"),
]
Train = Annotated[
    bool,
    typer.Option(
        "--train", help="Compile a forward+backward step instead of inference under no_grad."
    ),
]
Cold = Annotated[
    bool,
    typer.Option(
        "--cold",
        help="Compile with private, empty caches (your caches untouched): a first run's compile time.",
    ),
]
TryFixes = Annotated[
    bool,
    typer.Option(
        "--try-fixes",
        help="Also run the model once per remedy that needs no code edit (a config setting, dynamic=True, mark_dynamic) and show what each changed.",
    ),
]
Jobs = Annotated[
    int | None,
    typer.Option(
        "--jobs",
        help="With --try-fixes: runs at a time (default: the cores there are).",
        metavar="N",
    ),
]
Repeat = Annotated[
    int | None,
    typer.Option(
        "--repeat",
        help="Timed blocks per variant (default: about 1 s worth); their spread needs 2 or more.",
        metavar="N",
        min=1,
    ),
]
Warmup = Annotated[
    int | None,
    typer.Option(
        "--warmup",
        help="Untimed calls per variant first (default: 0.2 s CPU, 1 s CUDA).",
        metavar="N",
        min=0,
    ),
]
Timeout = Annotated[
    float,
    typer.Option(
        "--timeout",
        help="Stop the run after this many seconds, more than 0 (exit 5).",
        metavar="SECONDS",
    ),
]
Html = Annotated[
    str | None,
    typer.Option(
        "--html",
        help="Also write the report as one self-contained HTML file (no network needed).",
        metavar="FILE",
    ),
]
Numerics = Annotated[
    bool,
    typer.Option(
        "--numerics/--no-numerics",
        help="Judge compiled's outputs against eager and a float64 reference, and where they "
        "depart, find the stage and op (--no-numerics: the plain comparison only; skips "
        "the model's float64 copy).",
    ),
]
ReproDir = Annotated[
    str,
    typer.Option(
        "--repro-dir",
        help="Where compiled outputs depart from eager: write repro_<graph>.py (a script that "
        "runs alone and shows the difference) and its inputs here.",
        metavar="DIR",
    ),
]
Format = Annotated[
    str,
    typer.Option(
        "--format", "-f", help="table, json, markdown, csv, junit or html.", metavar="FORMAT"
    ),
]
Output = Annotated[
    str | None,
    typer.Option(
        "--output", "-o", help="Write the report to this file instead of stdout.", metavar="FILE"
    ),
]


# --- `run`'s own options (a job of the user's, not a model) ---------------------------------

JobCommand = Annotated[
    list[str] | None,
    typer.Argument(
        help="The command to run, after `--`: python train.py ..., torchrun ..., a shell script.",
        show_default=False,
        metavar="-- COMMAND...",
    ),
]
TraceDir = Annotated[
    str | None,
    typer.Option(
        "--trace-dir",
        help="Keep the job's trace in this new or empty folder (`compilediag report DIR` reads it again).",
        metavar="DIR",
    ),
]
ProfileSteps = Annotated[
    str | None,
    typer.Option(
        "--profile-steps",
        help=f"Time steps A to B ({STEPS_ARE}), counted from 1: each step in parts (forward, backward, optimizer, data, the rest), then the kernels over the steps after them. Off by default.",
        metavar="A-B",
    ),
]
KernelProfile = Annotated[
    bool,
    typer.Option(
        "--kernels/--no-kernels",
        help="With --profile-steps: profile the kernels over the steps after the window (at most 5). On CUDA, torch.profiler's CUPTI stays loaded after it and slows the job's later steps (docs/usage.md says by how much). --no-kernels leaves the kernel profile out.",
    ),
]
StopAfter = Annotated[
    int | None,
    typer.Option(
        "--stop-after",
        help="End the job after its step N (on every rank), with the report given: a long job's diagnosis in its first steps.",
        metavar="N",
        min=1,
    ),
]
TryJobFixes = Annotated[
    bool,
    typer.Option(
        "--try-fixes",
        help="With --profile-steps: run the job again as it is and with each remedy its step calls for that needs no edit of your code (the optimizer's foreach/fused, DataLoader workers, capture_scalar_outputs, CUDA graphs, TF32), each to the window's end, alternated round by round, and measure each by the job's own step over the same window: its effect with a 95% interval, the part it targets, breaks, recompiles, the losses. Kept only where the whole interval is at least 5% faster; the kept ones are measured together. Your caches are left as they were.",
    ),
]
Budget = Annotated[
    float | None,
    typer.Option(
        "--budget",
        help="With --try-fixes: the seconds its alternated runs may take (the job's first run, before them, not counted), kept to the run: a round starts only where it fits (the first always runs), and more rounds run until each remedy's interval settles (at most 8). Without it: the 3 rounds an interval needs, their time said before they start.",
        metavar="SECONDS",
        min=0,
        show_default=False,
    ),
]
ApplyKept = Annotated[
    bool,
    typer.Option(
        "--apply",
        help="With --try-fixes: write the kept remedies into your code where the object is made (an optimizer's fused=True, a DataLoader's workers, mode=\"reduce-overhead\" at torch.compile, TF32 after the imports), then run the edited job to verify it. Your files are left unchanged where nothing was kept.",
    ),
]
CheckNumerics = Annotated[
    bool,
    typer.Option(
        "--check-numerics",
        help="Run the job twice more with torch.compile off (TORCHDYNAMO_DISABLE=1), to the "
        "window's end, and compare the losses step by step: the first step where compiled "
        "parts from eager beyond eager's own run-to-run spread. The job must seed torch.",
    ),
]
ProfileOut = Annotated[
    str | None,
    typer.Option(
        "--profile-out",
        help="With --profile-steps: write the kernel profile (the steps after the window) as a Chrome trace, each generated kernel given its graph and the lines of yours it came from. Open it in ui.perfetto.dev.",
        metavar="FILE",
    ),
]


# --- how to run the model: each option declared once ------------------------------------


def _opt(default: Any, cli: Any, config: tuple[str, tuple[type, ...], str] | None = None) -> Any:
    """A RunOptions field: its default, its command-line option, and where it has one its
    [tool.compilediag] key (key, the TOML types it takes, those in words)."""
    return field(default=default, metadata={"cli": cli, "config": config})


@dataclass
class RunOptions:
    """How to run the model: what every command that runs one takes. The command-line
    options, the config file's keys for them and their type checks all come from here."""

    target: str | None = _opt(None, OptionalTarget, ("model", (str,), "a string (PATH.py or PATH.py:ATTR)"))  # fmt: skip
    inputs: list[str] | None = _opt(None, Inputs, ("inputs", (list, str), 'a list of strings like ["8x16"]'))  # fmt: skip
    backend: str | None = _opt(None, Backend, ("backend", (str,), 'a string like "inductor"'))
    mode: str | None = _opt(None, Mode, ("mode", (str,), 'a string like "reduce-overhead"'))
    dynamic: bool | None = _opt(None, Dynamic)
    device: str | None = _opt(None, Device, ("device", (str,), '"cpu" or "cuda"'))
    train: bool = _opt(False, Train)
    timeout: float = _opt(900, Timeout)
    cold: bool = _opt(False, Cold)


RUN_CONFIG_KEYS = {
    f.metadata["config"][0]: f.name for f in fields(RunOptions) if f.metadata["config"]
}


def run_options(
    *, without: tuple[str, ...] = (), target: Any = OptionalTarget
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """The command takes an option for each field of RunOptions (but those `without`), in
    the place of its `run` parameter, and gets them as one RunOptions: an option is
    declared once, in RunOptions. `target`: the model argument's annotation (a command
    with no config file to fall back on requires it)."""
    declared = [f for f in fields(RunOptions) if f.name not in without]
    options = [
        inspect.Parameter(
            f.name,
            KEYWORD,
            default=inspect.Parameter.empty
            if f.name == "target" and target is not OptionalTarget
            else f.default,
            annotation=target if f.name == "target" else f.metadata["cli"],
        )
        for f in declared
    ]
    return _in_place_of("run", options, lambda values: RunOptions(**values))


# --- the gate's options ------------------------------------------------------------------


def gate_option(rule: GateRule) -> Any:
    """A gate rule's option, as its declaration says (gate.GATE_RULES)."""
    if rule.kind is bool:
        return Annotated[bool, typer.Option(*rule.options, help="Gate: " + rule.help)]
    metavar = "N" if rule.kind is int else "X"
    # a budget or a floor below 0 judges nothing a run can have: refused, as a usage error
    return Annotated[
        rule.kind | None,
        typer.Option(*rule.options, help="Gate: " + rule.help, metavar=metavar, min=0),
    ]


def gate_rules(*runs: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """The command takes an option for each gate rule a run of these kinds can judge, in
    the place of its `limits` parameter, and gets their values as `limits`: a rule is
    declared once, in gate.GATE_RULES."""
    from compilediag.gate import rules_for

    options = [
        inspect.Parameter(
            r.key, KEYWORD, default=False if r.kind is bool else None, annotation=gate_option(r)
        )
        for r in rules_for(runs)
    ]
    return _in_place_of("limits", options, lambda values: values)


def _in_place_of(
    name: str, options: list[inspect.Parameter], gather: Callable[[dict[str, Any]], Any]
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """A command's parameter `name` becomes these options, in its place; the command gets
    `gather(their values)` as `name`. Typer calls a command with keywords, so every
    parameter is keyword-only: a required one (the model, --out) may follow optional ones,
    wherever its declaration puts it."""

    def with_options(fn: Callable[..., None]) -> Callable[..., None]:
        sig = inspect.signature(fn, eval_str=True)
        params = [q for p in sig.parameters.values() for q in (options if p.name == name else [p])]

        @functools.wraps(fn)
        def command(**kwargs: Any) -> None:
            fn(**{name: gather({o.name: kwargs.pop(o.name) for o in options})}, **kwargs)

        command.__signature__ = sig.replace(  # type: ignore[attr-defined]
            parameters=[p.replace(kind=KEYWORD) for p in params]
        )
        return command

    return with_options


Requests = Annotated[
    str | None,
    typer.Option(
        "--requests",
        help="Serving: a stream of requests, one JSON object a line with the shapes of the "
        "call's tensors in order (the README shows one); default: the model file's "
        "get_request_stream(), if it has one.",
        metavar="FILE",
    ),
]
ColdStart = Annotated[
    bool,
    typer.Option(
        "--cold-start/--no-cold-start",
        help="Serving: also time the plan's warm-up in fresh processes with warm caches "
        "and with torch's cache artifacts (two more processes).",
    ),
]
MaxShape = Annotated[
    str | None,
    typer.Option(
        "--max-shape",
        help="Serving: the largest request you serve, dimension by dimension (8x512: batch 8, "
        "length 512): the plans' ranges and the largest bucket reach it where the stream "
        "did not.",
        metavar="SHAPE",
    ),
]
ServingMode = Annotated[
    str | None,
    typer.Option(
        "--serving-mode",
        help="Serving: the mode requests are served in, inference_mode or no_grad (default: "
        "the model file's SERVING_MODE, else inference_mode); the stream is replayed, the "
        "plans measured and the plan's code warms up and serves in it.",
        metavar="MODE",
    ),
]
