"""Setting .requires_grad on a tensor inside forward.

Torch pins this break in its graph-break registry (GB0206); 2.15 traces it without one.
Breaks at line 13 (GB0206; 2.15: none).
"""

import torch


def forward(x):
    h = x * 2
    w = torch.ones(4)
    w.requires_grad = True  # <- graph break
    return h * w


def get_model():
    return forward


def get_inputs():
    return (torch.randn(4),)
