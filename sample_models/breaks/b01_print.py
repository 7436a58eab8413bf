"""A print of a string in forward.

After PyTorch's test_error_messages.py::test_unsupported_builtin.
Breaks at line 18 (GB0059).
"""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        h = self.fc(x)
        print("forward reached")  # <- graph break
        return h.relu()


def get_model():
    return Model()


def get_inputs():
    return (torch.randn(2, 8),)
