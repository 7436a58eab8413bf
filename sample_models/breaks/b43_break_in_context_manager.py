"""A graph break inside a user-defined context manager Dynamo cannot resume across (GB0066
follows).

After PyTorch's test_error_messages.py::test_generic_ctx_mgr_graph_break_fullgraph_false.
Breaks at line 22 (GB0025).
"""

import torch


class Timer:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def forward(x):
    h = x * 2
    with Timer():
        torch._dynamo.graph_break()  # <- graph break
        h = h + 1
    return h


def get_model():
    return forward


def get_inputs():
    return (torch.randn(4),)
