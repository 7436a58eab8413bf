"""Older saved reports, read as this release's: each schema's step to the next, in turn."""

from __future__ import annotations

from typing import Any


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    """A saved report's data at the current schema (unchanged where it already is, or where
    its version is unknown: the caller says so)."""
    if data.get("schema_version") == 1:
        data = _migrate_v1(data)
    if data.get("schema_version") == 2:
        data = _migrate_v2(data)
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
