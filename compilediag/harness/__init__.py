"""The harness: what runs the user's code under the compile stack and watches it. A target
is loaded (`target`: a model file, its inputs, `--model`); `explain`, `recompiles` and
`dump-kernels` run it in a worker process (`runner` starts it, `spawn`/`launch` hold the
child processes, `worker` and `worker_torch` do the torch work, `measure` and
`device_time` time it); `compilediag run` runs any command with the `bootstrap` on its
PYTHONPATH, whose runtime probe counts steps and times the profiling window. What comes
out is a `worker_types` result and torch's structured trace, for the stages above.

May import: errors, paths, fsutil, report, trace, advice (the remedies a worker applies).
"""
