"""The terminal's report (rich): the whole Report in sections (`report`), the facts tables
of a run's job and compile (`facts`), the recompiles and the timeline (`recompiles`), and
the rows and tables they share (`parts`)."""

from compilediag.render.table.report import render_kernels, render_recompiles, render_table

__all__ = ["render_kernels", "render_recompiles", "render_table"]
