"""compilediag: one report of what torch.compile did to your model, with a verdict."""

__version__ = "0.1.0"
