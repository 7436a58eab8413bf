"""Activation checkpointing of a function that mutates a list from outside it (torch
reports the mutation, inside the checkpointed function).

After PyTorch's test_error_messages.py::test_hop_side_effect_error_includes_hop_context_fullgraph_false.
Breaks at line 16 (GB0067).
"""

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

calls = []


def block(x):
    calls.append(1)  # <- graph break
    return x.sin()


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        h = self.fc(x)
        h = checkpoint(block, h, use_reentrant=False)
        return h.relu()


def get_model():
    return Model()


def get_inputs():
    return (torch.randn(2, 8),)
