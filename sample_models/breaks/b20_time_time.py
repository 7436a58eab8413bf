"""time.time() in forward: a C builtin of the standard library.

After PyTorch's test_error_messages.py::test_cpp_extension_recommends_custom_ops (a C function Dynamo skips).
Breaks at line 14 (GB0007; 2.15: GB9193).
"""

import time

import torch


def forward(x):
    h = x * 2
    started = time.time()  # <- graph break
    return h + (started > 0)


def get_model():
    return forward


def get_inputs():
    return (torch.randn(4),)
