"""`run`'s job run again after its own run: `--try-fixes` (each remedy alternated with the
job as it is, and the rounds' time), `--apply` (the kept ones written into the code), and
`--check-numerics` (the losses against eager runs of the same steps)."""
