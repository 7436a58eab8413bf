"""A logger.info call in forward.

Torch pins this break in its graph-break registry (GB0291).
Breaks at line 22 (GB0291).
"""

import logging

import torch
from torch import nn

logger = logging.getLogger(__name__)


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        h = self.fc(x)
        logger.info("activations computed")  # <- graph break
        return h.relu()


def get_model():
    return Model()


def get_inputs():
    return (torch.randn(2, 8),)
