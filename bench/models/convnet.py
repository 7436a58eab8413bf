"""A small conv net (2x3x16x16): little GPU work per call, many small kernels."""

import torch
from torch import nn


def get_model():
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10),
    ).eval()  # fmt: skip


def get_inputs():
    return (torch.randn(2, 3, 16, 16),)
