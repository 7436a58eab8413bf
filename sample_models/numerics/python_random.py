"""A model that draws from Python's and NumPy's random numbers (noise, a jitter), not torch's:
Dynamo leaves both calls to Python (graph breaks), so eager and compiled draw the same
values from the same state. Their outputs match; they differ only where the two calls start
from different states."""

import random

import numpy as np
import torch


class Jittered(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)

    def forward(self, x):
        h = self.lin(x).tanh()
        h = h + random.gauss(0.0, 0.5)
        scale = np.float32(np.random.uniform(0.5, 1.5))
        return h * torch.from_numpy(np.array([scale]))


def get_model():
    torch.manual_seed(0)
    return Jittered().eval()


def get_inputs():
    return (torch.randn(8, 16),)
