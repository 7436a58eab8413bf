"""The batch size changes between calls. Expected with the default (automatic dynamic):
3 calls, 1 recompile (on the 2nd call: x dim 0 changed 2 -> 4), after which dim 0 is
dynamic and the 3rd call (batch 8) reuses the graph."""

import torch
from torch import nn


def get_model():
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))


def get_input_sets():
    return [(torch.randn(b, 16),) for b in (2, 4, 8)]


def get_inputs():
    return get_input_sets()[0]
