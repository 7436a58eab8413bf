"""requires_grad_() on an intermediate that is returned.

Torch pins this break in its graph-break registry (GB8985).
Breaks at line 13 (GB8985).
"""

import torch


def forward(x):
    h = x * 2
    w = torch.ones(4)
    w.requires_grad_()  # <- graph break
    return h * w, w


def get_model():
    return forward


def get_inputs():
    return (torch.randn(4),)
