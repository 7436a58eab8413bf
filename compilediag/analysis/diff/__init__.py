"""Two runs side by side (`compilediag diff A B`): the comparison (`compare`), the
FX-graph caches' keys (`caches`), the timings judged against the runs' spread
(`timings`), and the types it gives (`model`).
"""
