"""One decode step with a key/value cache object that the step appends to, as a
`transformers` cache does. Expected: no graph breaks; outputs match eager when eager and
compiled each get their own copy of the cache; the report names `cache` as mutated."""

import torch
from torch import nn


class Cache:
    def __init__(self, keys: torch.Tensor) -> None:
        self.keys = keys

    def append(self, k: torch.Tensor) -> torch.Tensor:
        self.keys = torch.cat([self.keys, k], dim=1)
        return self.keys


class DecodeStep(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q = nn.Linear(16, 16)
        self.k = nn.Linear(16, 16)

    def forward(self, x, cache):
        keys = cache.append(self.k(x))
        scores = self.q(x) @ keys.transpose(1, 2)
        return scores.softmax(-1) @ keys


def get_model():
    return DecodeStep()


def get_inputs():
    return (torch.randn(2, 1, 16), Cache(torch.randn(2, 8, 16)))
