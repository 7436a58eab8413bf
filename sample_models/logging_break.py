"""A logging call in forward. Expected: 1 graph break at line 18, cause `logging`."""

import logging

import torch
from torch import nn

log = logging.getLogger(__name__)


class Logged(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(16, 16)

    def forward(self, x):
        y = self.proj(x).relu()
        log.warning("activations computed")
        return y.sum(dim=-1)


def get_model():
    return Logged()


def get_inputs():
    return (torch.randn(4, 16),)
