"""torch.linalg.lstsq with capture_dynamic_output_shape_ops=True: the setting itself gives
this break (no meta kernel).

After PyTorch's test_error_messages.py::test_dynamic_shape_operator_no_meta_kernel.
Breaks at line 16 (GB0037).
"""

import torch

# the torch._dynamo.config settings this sample is compiled under (the break needs them)
CONFIG = {"capture_dynamic_output_shape_ops": True}


def forward(a, b):
    a = a + torch.eye(4)
    sol = torch.linalg.lstsq(a, b).solution  # <- graph break
    return sol * 2


def get_model():
    return forward


def get_inputs():
    return (torch.randn(4, 4), torch.randn(4, 2))
