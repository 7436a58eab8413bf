"""Several common graph-break causes in one model (the README's demo).

Expected: 3 graph-break sites, at line 22 (print), line 24 (data-dependent `if`) and
line 26 (`.item()`); 4 graphs.
"""

import torch
from torch import nn


class Demo(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(32, 64)
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        h = torch.relu(self.embed(x))
        # The three lines below each stop the graph. compilediag reports every one of
        # them with the reason and a fix; fullgraph=True would stop at the first.
        h = h * 2
        print("debug: forward reached")
        h = h + 1
        if h.mean() > 0.5:
            h = h - 0.5
        threshold = h.max().item()
        return self.head(h / threshold)


def get_model():
    return Demo()


def get_inputs():
    return (torch.randn(8, 32),)
