"""A model that changes its input in place (`x.mul_(0.5)`). Expected: no graph breaks;
outputs match eager when each run gets its own copy of x; the report names x as mutated."""

import torch
from torch import nn


class Scale(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        x.mul_(0.5)
        return self.fc(x).relu()


def get_model():
    return Scale()


def get_inputs():
    return (torch.randn(4, 16),)
