"""The README's sample outputs, made by running the commands they show.

    python docs/samples.py            # run each command, rewrite its block in README.md
    python docs/samples.py run fix    # only those samples
    python docs/samples.py --check    # exit 1 where a block is not what the command prints

Each sample sits in README.md between `<!-- sample: NAME -->` and `<!-- /sample -->`, as
the command line and what it printed (100 columns, no colour), run from the repository
root. Times, speed-ups, versions and the folder a checkout is in change from run to run
and machine to machine: `--check` compares the lines with every number masked and paths
taken from the repository down, in any order (explain ranks breaks by their measured
cost), leaves out the lines that measure this machine (explain's Timings section, run's Job
section and its window's kernels, which of them cost most, a break's cost, the notes of
what the compile cost and of busy cores, which follow its caches and load), and is meant for the torch release that
made the samples (each header names it).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

SAMPLES = {
    "run": ["run", "--profile-steps", "3-7", "--", "python", "examples/train.py"],
    "explain": ["explain", "sample_models/graph_breaks.py"],
    "recompiles": ["recompiles", "sample_models/changing_float.py"],
    "report": ["report", "tests/fixtures/traces/torch-2.13.0-cpu/train_item.log"],
    "fix": ["fix", "sample_models/graph_breaks.py"],
}
BLOCK = re.compile(r"(<!-- sample: (?P<name>\w+) -->\n)(?P<body>.*?)(<!-- /sample -->)", re.S)


def run(name: str) -> str:
    """The sample's command line and its output, as the README shows them."""
    args = SAMPLES[name]
    env = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb"}
    # `python`, as a user types it, is this one (the venv's, with torch)
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    env.pop("GITHUB_ACTIONS", None)
    proc = subprocess.run(
        [sys.executable, "-m", "compilediag", *args],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=900,
    )  # fmt: skip
    if proc.returncode not in (0, 1):  # 1: the gate found something, as it should here
        raise SystemExit(f"{name}: exit {proc.returncode}\n{proc.stderr}")
    return f"$ compilediag {' '.join(args)}\n{proc.stdout.rstrip()}\n"


def blocks(text: str) -> dict[str, str]:
    """name -> the output in the README's block (without the code fence)."""
    return {m["name"]: m["body"].strip().removeprefix("```").removesuffix("```").strip("\n") + "\n"
            for m in BLOCK.finditer(text)}  # fmt: skip


# the notes that follow this machine, as its timings do: what a compile cost
# (analysis/compile/time_advice.py: its caches, its speed) and cores found busy (its load)
MACHINE_NOTES = (
    "generated and compiled kernels", "of its tracing", "identical blocks",
    "the cores were busy",
)  # fmt: skip


def without_machine_notes(output: str) -> list[str]:
    """The output's lines, less each note that follows this machine (MACHINE_NOTES): a note
    is its `! ` line and the lines it wraps onto, up to the next note or a blank line."""
    out: list[str] = []
    note: list[str] = []
    for line in [*output.splitlines(), ""]:
        if note and (not line or line.startswith("! ")):
            if not any(m in " ".join(note) for m in MACHINE_NOTES):
                out += note
            note = []
        if line.startswith("! "):
            note = [line]
        elif note:
            note.append(line)
        else:
            out.append(line)
    return out[:-1]  # (the blank line that ended the last note)


def comparable(output: str) -> list[str]:
    """The lines that say what was found, numbers masked, in any order (explain ranks the
    breaks by their measured cost); a machine's measurements left out."""
    lines, timing, eager = [], False, False
    for line in _evidence_joined(without_machine_notes(output)):
        # a break's eager time, measured on this machine, and the lines it wraps onto
        eager = line.lstrip().startswith("eager ") or eager and line.startswith(" " * 11)
        if eager:
            continue
        if line.startswith(("Timings", "Job")):
            timing = True
        elif line.startswith("Kernels in the window"):  # its rows: this machine's costliest
            lines.append(re.sub(r"\(.*", "", line))
            timing = True
            continue
        elif timing and line and not line.startswith(" "):
            timing = False
        if timing:  # measured on this machine
            continue
        if line.lstrip().startswith("evidence: "):  # fix's: its times are this machine's
            line = re.sub(r"; compiled call .*", "", line)
            lines.append(" ".join(re.sub(r"\d+(\.\d+)?", "#", line).split()))
            continue
        # the headline's speed-up is this machine's too, marked unreliable on a busy one (and
        # then long enough to wrap onto a line of its own)
        shown = re.sub(r"(\s*·\s*)?speedup [\d.]+x( \(unreliable\))?", "", line)
        if shown != line and not shown.strip():  # a line that held the speed-up alone
            continue
        line = shown
        line = re.sub(r"torch \S+", "torch ?", line)
        # a recorded trace names files where it was recorded: compare from the repository down
        line = re.sub(r"/\S*/(?=(tests|sample_models)/)", "", line)
        line = re.sub(r"\d+(\.\d+)?( ?(ms|s|µs)\b)?", "#", line)  # 8.05 s, 672 ms: one width
        lines.append(" ".join(line.split()))
    return sorted(lines)


def _evidence_joined(lines: list[str]) -> list[str]:
    """fix's evidence, wrapped onto lines indented 12 columns, as one line again."""
    out: list[str] = []
    for line in lines:
        wrapped = line.startswith(" " * 12) and not line.startswith(" " * 13)
        if wrapped and out and out[-1].lstrip().startswith("evidence: "):
            out[-1] += " " + line.strip()
        else:
            out.append(line)
    return out


def made_with(output: str) -> str:
    """The torch release the sample's header names (`torch 2.13.0+cpu · ...`)."""
    m = re.search(r"^torch (\d+\.\d+)", output, re.M)
    return m.group(1) if m else ""


def write(names: list[str]) -> None:
    text = README.read_text()
    for name in names:
        out = run(name)
        text, n = BLOCK.subn(
            lambda m, name=name, out=out: (
                m.group(0) if m["name"] != name else f"{m.group(1)}```\n{out}```\n{m.group(4)}"
            ),
            text,
        )
        print(f"{name}: {len(out.splitlines())} lines", file=sys.stderr)
    README.write_text(text)


def main() -> None:
    if "--check" not in sys.argv[1:]:
        names = sys.argv[1:] or list(SAMPLES)
        unknown = [n for n in names if n not in SAMPLES]
        if unknown:
            raise SystemExit(
                f"no such sample: {', '.join(unknown)} (they are {', '.join(SAMPLES)})"
            )
        write(names)
        return
    shown = blocks(README.read_text())
    stale = [n for n in SAMPLES if comparable(run(n)) != comparable(shown.get(n, ""))]
    if stale:
        raise SystemExit(f"stale README samples: {', '.join(stale)} (run python docs/samples.py)")


if __name__ == "__main__":
    main()
