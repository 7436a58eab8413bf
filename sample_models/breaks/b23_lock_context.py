"""A `with` on a threading.Lock made outside the compiled code.

After PyTorch's test_error_messages.py::test_unsupported_context.
Breaks at line 16 (GB0142).
"""

import threading

import torch

lock = threading.Lock()


def forward(x):
    h = x * 2
    with lock:  # <- graph break
        h = h + 1
    return h.relu()


def get_model():
    return forward


def get_inputs():
    return (torch.randn(4),)
