"""A custom op that changes its input in place without declaring it (mutates_args=()).

Eager sees the op's change to `h` in `h * s`; Inductor, told the op is functional, computes
`h` again inside the kernel that multiplies: compiled departs from eager at line 29.
torch.library.opcheck's test_schema names the op.
"""

import torch


@torch.library.custom_op("cdnum::scale_rows", mutates_args=())
def scale_rows(x: torch.Tensor) -> torch.Tensor:
    x.mul_(2)  # <- changes its input: the schema says it does not
    return x.sum(-1, keepdim=True)


@scale_rows.register_fake
def _(x):
    return x.new_empty(x.shape[:-1] + (1,))


class RowScale(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.lin(x) + 1
        return h * scale_rows(h)


def get_model():
    return RowScale()


def get_inputs():
    return (torch.randn(4, 8),)
