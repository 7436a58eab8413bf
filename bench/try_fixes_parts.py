"""What a `run --try-fixes` run's time is made of, against what its forecast takes it to be.

`python bench/try_fixes_parts.py OUT.json -- compilediag's run arguments` runs the CLI in
this process with its pieces timed from outside (nothing of the tool changed): each launch
of the job (its wall time; its processes' own clocks: from the probe's start to its window's
end and to the facts written), each parse of a trace folder into a report, the copy of the
caches. Then, per launch: the time before the probe started and after its facts were written
(the interpreter's start, torch's import before the probe, the teardown), and what the tool
did between launches. Writes the pieces as JSON and a summary on stdout.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

EVENTS: list[dict[str, Any]] = []
T0 = time.monotonic()


def _timed(module: Any, name: str, kind: str, extra: Any = None) -> None:
    real = getattr(module, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.monotonic()
        out = real(*args, **kwargs)
        event = {"kind": kind, "start": start - T0, "s": time.monotonic() - start}
        if extra is not None:
            event.update(extra(args, kwargs, out))
        EVENTS.append(event)
        return out

    setattr(module, name, wrapper)


def _launch_extra(args: Any, kwargs: Any, out: Any) -> dict[str, Any]:
    from compilediag.harness.bootstrap._compilediag_runtime import STOP_ENV

    env = args[1] if len(args) > 1 else kwargs.get("env", {})
    return {"stop_after": env.get(STOP_ENV), "wall_s": out.wall_s}


def _processes_extra(args: Any, kwargs: Any, out: Any) -> dict[str, Any]:
    keys = ("window_end_s", "last_step_s", "exit_s", "wall_s")
    return {"processes": [{k: getattr(p, k) for k in keys} for p in out]}


def main() -> None:
    out_path = Path(sys.argv[1])
    argv = sys.argv[sys.argv.index("--", 2) + 1 :]
    from compilediag.analysis.ranks import fold
    from compilediag.analysis.step import runtime
    from compilediag.cli.commands.again import job_caches
    from compilediag.harness import launch

    _timed(launch, "launch", "launch", _launch_extra)
    _timed(fold, "report_from_files", "parse")
    _timed(runtime, "read_processes", "processes", _processes_extra)
    real_copy = job_caches.copied_caches

    def copy(*args: Any, **kwargs: Any) -> Any:
        start = time.monotonic()
        cm = real_copy(*args, **kwargs)
        value = cm.__enter__()
        EVENTS.append({"kind": "copy", "start": start - T0, "s": time.monotonic() - start})
        return _Held(cm, value)

    job_caches.copied_caches = copy
    from compilediag.cli.app import main as cli

    sys.argv = ["compilediag", *argv]
    code = 0
    try:
        cli()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 0
    out_path.write_text(json.dumps({"exit": code, "events": EVENTS}, indent=1))
    _summary()


class _Held:
    def __init__(self, cm: Any, value: Any) -> None:
        self.cm, self.value = cm, value

    def __enter__(self) -> Any:
        return self.value

    def __exit__(self, *exc: Any) -> Any:
        return self.cm.__exit__(*exc)


def _summary() -> None:
    last_end = None
    for e in EVENTS:
        line = f"{e['start']:7.1f} s  {e['kind']:9} {e['s']:6.2f} s"
        if e["kind"] == "launch":
            line += f"  stop_after={e['stop_after']}"
            if last_end is not None:
                line += f"  (tool between launches {e['start'] - last_end:.2f} s)"
            last_end = e["start"] + e["s"]
        if e["kind"] == "processes":
            for p in e["processes"]:
                line += "  probe: " + ", ".join(
                    f"{k.removesuffix('_s')} {v:.2f}" for k, v in p.items() if v is not None
                )
        print(line)


if __name__ == "__main__":
    main()
