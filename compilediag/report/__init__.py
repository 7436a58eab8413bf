"""The Report: the findings as data (`model`: every dataclass, the JSON contract, the job's
summary over its ranks), the vocabulary of its kinds and causes (`vocabulary`), its
(de)serialisation (`serial`), older schemas read as this one (`migrations`) and how sets
of ranks are named (`ranksets`). The lowest stage: every other one speaks in its types.

May import: errors, paths, fsutil.
"""
