"""Serving (#69): the report's `serving` section from the worker's serving pass and the
plan's fresh-process checks: the stream's graphs and recompiles by request, the limit's
eager requests, the plans side by side, the one chosen and why (by what the run measured),
its warm-up, its code, and the cold start."""
