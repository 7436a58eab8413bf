"""Write the generated kernels, one file each, plus each graph's wrapper and an index.

Everything is written into a staging folder beside the target and renamed into place at
the end, so an interrupted or failed dump leaves the user's folder as it was.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from compilediag.analysis.compile.kernels import GraphCode
from compilediag.errors import UsageError
from compilediag.fsutil import public_dir, write_atomic
from compilediag.paths import short_path
from compilediag.render import compiled_as
from compilediag.report.model import Report
from compilediag.report.serial import to_plain
from compilediag.report.vocabulary import FindingKind


def check_out_dir(out: str, force: bool) -> Path:
    """Refuse before the model runs: a file, a non-empty folder without --force, no rights."""
    p = Path(out)
    if p.exists() and not p.is_dir():
        raise UsageError(f"--out {out} is a file, not a folder.", hint="Name a folder.")
    if p.is_dir() and any(p.iterdir()) and not force:
        raise UsageError(
            f"--out {out} is not empty.",
            hint="Pick an empty folder, or pass --force to replace it.",
        )
    try:  # create it now and prove we can write beside it, before the model runs
        p.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tempfile.mkdtemp(prefix=f".{p.name}.", dir=p.resolve().parent))
    except OSError as e:
        raise UsageError(
            f"--out {out} cannot be written: {e.strerror}.", hint="Pick a folder you can write to."
        ) from None
    return p


def safe_name(text: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("._")
    return name[:120] or "kernel"


def _graph_prefix(compile_id: str) -> str:
    return "graph_" + safe_name(compile_id.replace("/", "_").replace("!", "ca"))


def write_dump(report: Report, graphs: list[GraphCode], out: Path, force: bool) -> list[str]:
    out = out.resolve()
    staging: Path | None = None
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
        public_dir(staging)
        files = _write_all(report, graphs, staging)
        if out.exists():
            if not force and any(out.iterdir()):  # filled while the model ran
                raise UsageError(f"--out {out} is not empty.", hint="Pass --force to replace it.")
            old = out.with_name(f".{out.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(out, old)
            os.replace(staging, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(staging, out)
        return files
    except OSError as e:
        raise UsageError(
            f"cannot write {out}: {e.strerror}.", hint="Pick a writable folder."
        ) from None
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)


def _write_all(report: Report, graphs: list[GraphCode], folder: Path) -> list[str]:
    files: list[str] = []
    index_graphs = []
    for g in graphs:
        prefix = _graph_prefix(g.compile_id)
        wrapper = f"{prefix}_wrapper.py"
        write_atomic(folder / wrapper, g.wrapper)
        files.append(wrapper)
        for ks in g.kernels:
            if not ks.source:
                continue
            name = f"{prefix}_{safe_name(ks.kernel.name)}{ks.ext}"
            write_atomic(folder / name, ks.source)
            ks.kernel.file = name
            files.append(name)
        index_graphs.append({"compile_id": g.compile_id, "wrapper": wrapper})
    index = {
        "tool": report.tool,
        "environment": to_plain(report.environment),
        "target": to_plain(report.target),
        "graphs": index_graphs,
        "kernels": [to_plain(k) for k in report.kernels],
    }
    write_atomic(folder / "index.json", json.dumps(index, indent=2) + "\n")
    write_atomic(folder / "index.md", index_markdown(report))
    return files + ["index.json", "index.md"]


def index_markdown(report: Report) -> str:
    e = report.environment
    out = [
        f"# Kernels of `{short_path(report.target.path)}`",
        "",
        f"torch {e.torch} · {e.device_name or e.device} · {compiled_as(e)}",
        "",
        *[f"> {n.text}\n" for n in report.notes if n.kind == FindingKind.NO_PROVENANCE],
        "| kernel | graph | kind | fused ATen ops | from | modules | lines | file |",
        "|---|---|---|---|---|---|---:|---|",
    ]
    for k in report.kernels:
        lines = ", ".join(f"`{short_path(s)}`" for s in k.source_lines)
        out.append(
            f"| `{k.name}` | {k.compile_id} | {k.kind} | {', '.join(k.ops)} | {lines} | "
            f"{', '.join(k.modules)} | {k.lines or ''} | "
            f"{f'[{k.file}]({k.file})' if k.file else ''} |"
        )
    return "\n".join(out) + "\n"
