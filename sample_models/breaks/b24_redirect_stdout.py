"""contextlib.redirect_stdout: a contextlib API Dynamo does not support.

Torch pins this break in its graph-break registry (GB0262).
Breaks at line 14 (GB0262).
"""

import contextlib

import torch


def forward(x):
    h = x * 2
    with contextlib.redirect_stdout(None):  # <- graph break
        h = h + 1
    return h.relu()


def get_model():
    return forward


def get_inputs():
    return (torch.randn(4),)
