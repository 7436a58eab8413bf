"""A NumPy function torch._numpy does not model (np.lexsort).

Torch pins this break in its graph-break registry (GB0294).
Breaks at line 13 (GB0294).
"""

import numpy as np
import torch


def forward(x):
    h = x * 2
    order = np.lexsort((h.numpy(),))  # <- graph break
    return h[torch.from_numpy(order)]


def get_model():
    return forward


def get_inputs():
    return (torch.randn(4),)
