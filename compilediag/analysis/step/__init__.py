"""What a run's step spent, and what shortens it: the runtime facts of a `run` job
(`runtime`), its steps that are not training (`other_work`), waiting across ranks
(`waits`), the kernel profile's kernels (`kernel_times`), what bounds the step
(`verdict`), what its parts say to change (`advice`), and the remedies `--try-fixes`
measures (`remedies`, alternated runs and their intervals in `trials`).
"""
