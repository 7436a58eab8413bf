"""A clean MLP. Expected: 1 graph, no graph breaks, no recompiles."""

import torch
from torch import nn


def get_model():
    return nn.Sequential(
        nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 10)
    )


def get_inputs():
    return (torch.randn(8, 32),)
