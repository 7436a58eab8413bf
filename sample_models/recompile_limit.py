"""Like per_layer_int.py with 12 layers: Layer.forward recompiles once per layer until
Dynamo's recompile limit (8 by default) is hit; the remaining layers then run in eager
mode without a word. Expected: the limit is reported, with the distinct reasons.
"""

import torch
from per_layer_int import Stack


def get_model():
    return Stack(n=12)


def get_inputs():
    return (torch.randn(4, 16),)
