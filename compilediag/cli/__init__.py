"""The command line: the typer app (`app`), its options (`options`), the project
configuration (`config`: pyproject.toml's [tool.compilediag]) and one module per command
(`commands/`), each of which runs a stage below it and renders or judges the Report.

May import: every stage.
"""
