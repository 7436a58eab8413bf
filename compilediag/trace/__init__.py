"""Reading torch: its structured trace (`parse`: records to one `Compile` per compile
id, `compiles`: what they hold), the text formats torch writes inside them (`formats`:
guards, break reasons, resume frames) and what each torch release does differently
(`releases`). Nothing here judges; the analysis stage does.

May import: errors, paths, fsutil, report.
"""
