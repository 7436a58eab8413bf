"""A Python float argument that changes every call (a sampling temperature).

Expected with the default settings: the float is specialised, so each new value
recompiles: 3 calls, 2 recompiles (guard `temperature == 0.7` failed, then `== 1.0`).
Fix: pass it as a tensor, or compile with dynamic=True.
"""

import torch
from torch import nn


class Sampler(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(16, 16)

    def forward(self, x, temperature: float):
        return torch.softmax(self.proj(x) / temperature, dim=-1)


def get_model():
    return Sampler()


def get_input_sets():
    x = torch.randn(4, 16)
    return [(x, t) for t in (0.7, 1.0, 1.3)]


def get_inputs():
    return get_input_sets()[0]
