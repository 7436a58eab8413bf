"""Two graph breaks that cost very different amounts: a post-processing step marked
torch.compiler.disable, which runs in eager mode between two graphs (line 31: its own time
is lost to the break), and an explicit torch._dynamo.graph_break() (line 33, almost free).
Expected: 2 break sites, 3 graphs; the break at line 31 costs about what
`postprocess` takes on its own, the one at line 33 a small fraction of it.
"""

import torch
from torch import nn


@torch.compiler.disable
def postprocess(h):
    # eager work the compiler never sees: many small ops, one at a time (small enough to
    # run on one thread, so the time is the same wherever it runs)
    for _ in range(25):
        h = torch.tanh(h * 1.01 + 0.1)
    return h


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc1 = nn.Linear(128, 128)
        self.fc2 = nn.Linear(128, 128)
        self.fc3 = nn.Linear(128, 10)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        h = postprocess(h)
        h = torch.relu(self.fc2(h))
        torch._dynamo.graph_break()
        return self.fc3(h).softmax(-1)


def get_model():
    return Model().eval()


def get_inputs():
    return (torch.randn(64, 128),)
