"""Analysis: pure functions from parsed traces (and the worker's or the runtime probe's
facts) to findings, in a room per question. `history` builds the compile history once
(`source`: the user's lines, `callers`: whose call a frame is); `compile/` (graphs, breaks,
kernels, compile time), `recompiles/` (failed guards in words, the advice that removes
each), `step/` (a `run` job's facts, what bounds its step, the remedies --try-fixes
measures), `ranks/` (a job's ranks folded, where they diverge) and `diff/` (two runs) are
functions of it, each finding's advice in its room; `notes` puts the findings in words;
`build` makes the whole Report. No torch imports here.

May import: errors, paths, fsutil, report, trace, fixes, harness (the result types).
"""
