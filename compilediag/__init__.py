"""compilediag: one report of what torch.compile did to your model, with a verdict."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from compilediag.inprocess import Capture

from compilediag.report.model import VERSION as __version__  # noqa: E402

__all__ = ["__version__", "capture"]


def capture(**kwargs: Any) -> AbstractContextManager[Capture]:
    """`with compilediag.capture() as run: ...`: what the block compiles and runs, as
    `compilediag run` reports it (compilediag.inprocess). Imports torch only when called."""
    from compilediag.inprocess import capture as in_process

    return in_process(**kwargs)
