"""A zip iterator passed into the compiled function (torch 2.13 reports `missing tp_iter`;
2.14 and later, `zip.__iter__` as a C method Dynamo has no model of).

After PyTorch's test_error_messages.py::test_super_call_method.
Breaks at line 13 (GB0811; 2.14: GB9493).
"""

import torch


def forward(x, pairs):
    h = x * 2
    for a, b in pairs:  # <- graph break
        h = h + a * b
    return h


def get_model():
    return forward


def get_inputs():
    return (torch.randn(4), zip(range(3), range(3), strict=True))
