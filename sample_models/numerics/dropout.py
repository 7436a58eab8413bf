"""Dropout in training mode: compiled code draws its random numbers its own way.

Outputs differ, and nothing is wrong: with torch._inductor.config.fallback_random = True
and one seed, eager and compiled match. The draw is at line 17.
"""

import torch


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.lin(x)).relu()


def get_model():
    return Block()  # an nn.Module is in training mode until .eval()


def get_inputs():
    return (torch.randn(8, 16),)
