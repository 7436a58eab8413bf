"""A helper decorated with torch._dynamo.disable, called from forward.

After PyTorch's test_error_messages.py::test_disable_message.
Breaks at line 23 (GB0098).
"""

import torch
from torch import nn


@torch._dynamo.disable
def clamp_helper(t):
    return t.clamp(-1, 1)


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        h = self.fc(x)
        h = clamp_helper(h)  # <- graph break
        return h * 2


def get_model():
    return Model()


def get_inputs():
    return (torch.randn(2, 8),)
