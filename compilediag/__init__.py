"""compilediag: one report of what torch.compile did to your model, with a verdict."""

from __future__ import annotations

from compilediag.inprocess import capture
from compilediag.report.model import VERSION as __version__

__all__ = ["__version__", "capture"]
