"""An ndarray method torch._numpy does not model (ndarray.tobytes).

Torch pins this break in its graph-break registry (GB0158).
Breaks at line 12 (GB0158).
"""

import torch


def forward(x):
    h = x * 2
    raw = h.numpy().tobytes()  # <- graph break
    return h + len(raw)


def get_model():
    return forward


def get_inputs():
    return (torch.randn(4),)
