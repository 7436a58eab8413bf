"""torch.linalg.lstsq: a dynamic-output-shape op without a meta kernel, so
capture_dynamic_output_shape_ops would only turn this break into GB0037.

After PyTorch's test_error_messages.py::test_dynamic_shape_operator_no_meta_kernel.
Breaks at line 13 (GB0036).
"""

import torch


def forward(a, b):
    a = a + torch.eye(4)
    sol = torch.linalg.lstsq(a, b).solution  # <- graph break
    return sol * 2


def get_model():
    return forward


def get_inputs():
    return (torch.randn(4, 4), torch.randn(4, 2))
