"""The pieces every section of the terminal view is made of: a table, a details block of
labelled lines, printing at a pinned width."""

from __future__ import annotations

import io

from rich.console import Console
from rich.padding import Padding
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

Row = tuple[str, Text | Syntax]  # a label and its value, in a details block


def print_items(items: list, width: int | None, color: bool) -> str:
    buf = io.StringIO()
    console = Console(
        file=buf,
        width=width or 100,
        force_terminal=color,
        no_color=not color,
        color_system="auto" if color else None,
        highlight=False,
        soft_wrap=False,
        force_jupyter=False,  # text into the buffer, even in a Jupyter kernel
    )
    for block in items:
        # rich fits every table and paragraph to the width; crop=False only lets a line
        # that must stay whole (a URL) run past it, as a terminal then wraps it unbroken
        console.print(block, crop=False)
    text = buf.getvalue()
    if not color:  # rich pads cells to the width; trailing blanks only hurt diffs and pipes
        text = "\n".join(line.rstrip() for line in text.split("\n"))
    return text


def new_table() -> Table:
    """A borderless table with bold headers: the one table style of this view."""
    return Table(box=None, pad_edge=False, show_edge=False, header_style="bold")


def details(rows: list[Row]) -> Padding:
    """Labelled lines with a hanging indent, so wrapped text stays in its column."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(style="dim", no_wrap=True, justify="right")
    grid.add_column(overflow="fold")
    for label, value in rows:
        grid.add_row(label, value)
    return Padding(grid, (0, 0, 0, 4))
