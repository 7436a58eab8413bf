"""A NumPy function Dynamo cannot map to torch (np.lexsort). Expected: 1 graph break at
line 16, cause `numpy`."""

import numpy as np
import torch
from torch import nn


class NumpyMix(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(16, 16)

    def forward(self, x):
        y = self.proj(x)
        order = np.lexsort(y.detach().numpy()[:, -2:].T)  # no torch twin: the graph stops
        return y[torch.from_numpy(order)] * 2


def get_model():
    return NumpyMix()


def get_inputs():
    return (torch.randn(4, 16),)
