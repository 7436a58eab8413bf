"""A custom op registered with torch.library for CPU only: it has no fake (meta) kernel.

Torch pins this break in its graph-break registry (GB0090).
Breaks at line 16 (GB0090).
"""

import torch

lib = torch.library.Library("compilediag_b18", "DEF")
lib.define("scale(Tensor x) -> Tensor")
lib.impl("scale", lambda x: x * 3, "CPU")


def forward(x):
    h = x * 2
    h = torch.ops.compilediag_b18.scale(h)  # <- graph break
    return h + 1


def get_model():
    return forward


def get_inputs():
    return (torch.randn(4),)
