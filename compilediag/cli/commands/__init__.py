"""One module per command. Each composes the same steps - load, run, collect, build,
render, gate - from `common`; the CLI only parses options and calls `run(options)`,
which returns the exit code."""
