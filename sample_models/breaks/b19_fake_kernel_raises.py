"""A torch.library.custom_op whose fake kernel raises NotImplementedError.

After PyTorch's test_error_messages.py::test_faketensor_nyi.
Breaks at line 22 (GB0087).
"""

import torch


@torch.library.custom_op("compilediag_b19::shift", mutates_args=())
def shift(x: torch.Tensor) -> torch.Tensor:
    return x + 1


@shift.register_fake
def _(x):
    raise NotImplementedError


def forward(x):
    h = x * 2
    h = torch.ops.compilediag_b19.shift(h)  # <- graph break
    return h.sin()


def get_model():
    return forward


def get_inputs():
    return (torch.randn(4),)
