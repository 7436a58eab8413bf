"""A call into a file Dynamo skips on purpose (unittest).

After PyTorch's test_error_messages.py::test_skipfile_call.
Breaks at line 14 (GB0007).
"""

import unittest

import torch


def forward(x):
    h = x * 2
    unittest.skip("not on this device")  # <- graph break
    return h + 1


def get_model():
    return forward


def get_inputs():
    return (torch.randn(4),)
