"""A skipped function (unittest.skip) reached through a class attribute, so Dynamo tries to
inline it.

After PyTorch's test_error_messages.py::test_skipfile_inline.
Breaks at line 19 (GB0008).
"""

import unittest

import torch


class Marks:
    skip = unittest.skip


def forward(x):
    h = x * 2
    Marks().skip()  # <- graph break
    return h + 1


def get_model():
    return forward


def get_inputs():
    return (torch.randn(4),)
