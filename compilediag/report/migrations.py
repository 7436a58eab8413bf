"""Older saved reports, read as this release's: each schema's step to the next, in turn.
Plain data in, plain data out: what a step needs of the report model (a job's summary
from its ranks) is handed in by the model (report.py), which imports this, not the other
way round."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# a job's summary (plain data) from its ranks' summaries (plain data)
Summarise = Callable[[list[dict[str, Any]]], dict[str, Any]]


def migrate(data: dict[str, Any], summarise: Summarise) -> dict[str, Any]:
    """A saved report's data at the current schema (unchanged where it already is, or where
    its version is unknown: the caller says so)."""
    if data.get("schema_version") == 1:
        data = _migrate_v1(data)
    if data.get("schema_version") == 2:
        data = _migrate_v2(data)
    if data.get("schema_version") == 3:
        data = _migrate_v3(data, summarise)
    if data.get("schema_version") == 4:
        data = _migrate_v4(data)
    if data.get("schema_version") == 5:
        data = _migrate_v5(data)
    return data


def _migrate_v1(data: dict[str, Any]) -> dict[str, Any]:
    """A schema-1 report as schema 2: its GPU time was `timings.device`."""
    data = {**data, "schema_version": 2}
    timings = data.get("timings")
    if isinstance(timings, dict) and "device" in timings and "device_ms" not in timings:
        timings = {**timings, "device_ms": timings["device"]}
        del timings["device"]
        data["timings"] = timings
    return data


def _migrate_v2(data: dict[str, Any]) -> dict[str, Any]:
    """A schema-2 report as schema 3: its notes, errors and divergence were text."""
    data = {**data, "schema_version": 3}
    for key, severity in (("notes", "note"), ("errors", "error"), ("divergence", "warning")):
        data[key] = [
            {"kind": "other", "message": x, "severity": severity} if isinstance(x, str) else x
            for x in data.get(key) or []
        ]
    return data


def _migrate_v3(data: dict[str, Any], summarise: Summarise) -> dict[str, Any]:
    """A schema-3 report as schema 4: a multi-rank report's summary summed its ranks; it now
    gives what one rank compiled (the worst rank's figures and their spread, from each
    rank's own summary in `ranks[]`) and names its sums `total_*`. One process's is as it was;
    a verdict stays what was judged then."""
    data = {**data, "schema_version": 4}
    ranks = data.get("ranks") or []
    if len(ranks) > 1:
        data["summary"] = {**(data.get("summary") or {}), **summarise(ranks)}
    return data


def _migrate_v4(data: dict[str, Any]) -> dict[str, Any]:
    """A schema-4 report as schema 5: its job's verdict and the remedies `run --try-fixes`
    measured are new (`runtime.bound`, `runtime.tried`); a report without them had none
    measured (a verdict it was given stays)."""
    data = {**data, "schema_version": 5}
    runtime = data.get("runtime")
    if isinstance(runtime, dict):
        data["runtime"] = {**runtime, "tried": runtime.get("tried") or []}
    return data


def _migrate_v5(data: dict[str, Any]) -> dict[str, Any]:
    """A schema-5 report as schema 6: a straggler is a finding of the job's runtime
    (`runtime.stragglers`), no longer divergence (its ranks compiled alike); how the
    ranks' waits were measured is new (`runtime.wait_method`: '' where a report does not
    say; its waits were then taken over the kernel profile's steps)."""
    data = {**data, "schema_version": 6}
    divergence = data.get("divergence") or []
    slow = [d for d in divergence if isinstance(d, dict) and d.get("kind") == "straggler"]
    data["divergence"] = [d for d in divergence if d not in slow]
    runtime = data.get("runtime")
    if isinstance(runtime, dict):
        data["runtime"] = {**runtime, "stragglers": slow, "wait_method": ""}
    return data
