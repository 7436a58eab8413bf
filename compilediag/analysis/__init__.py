"""Analysis: pure functions from parsed traces (and the worker's or the runtime probe's
facts) to findings. `history` builds the compile history once; `breaks`, `recompiles`,
`graphs`, `kernels`, `notes`, `timings` and `crosscheck` are functions of it; `fold`
folds the ranks of a job into one Report (`ranks`: where they diverge); `runtime` applies
a `compilediag run` job's facts; `build` makes the whole Report. No torch imports here.

May import: errors, paths, fsutil, report, trace, advice, harness (the result types).
"""
