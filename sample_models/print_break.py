"""A print in forward. Expected: 1 graph break at line 17 (the print), cause `print`."""

import torch
from torch import nn


class PrintModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 8)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        # Debug output left in forward: Dynamo cannot put print in a graph,
        # so the graph ends here and a second one starts after it.
        print("hidden shape", h.shape)
        return self.fc2(h)


def get_model():
    return PrintModel()


def get_inputs():
    return (torch.randn(4, 16),)
