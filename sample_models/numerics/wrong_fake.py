"""A custom op whose fake kernel says float32 while the op returns float64 (NumPy's default).

Inductor plans its next kernel for a float32 buffer and reads the float64 one as float32:
compiled departs from eager at line 27. torch.library.opcheck's test_faketensor names it.
"""

import numpy as np
import torch


@torch.library.custom_op("cdnum::np_tanh", mutates_args=())
def np_tanh(x: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(np.tanh(x.detach().numpy().astype(np.float64)))


@np_tanh.register_fake
def _(x):
    return torch.empty_like(x)  # <- float32: the op gives float64


class Squash(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        return np_tanh(self.lin(x)) * 3


def get_model():
    return Squash()


def get_inputs():
    return (torch.randn(4, 8),)
