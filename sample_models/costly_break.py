"""Two graph breaks that cost very different amounts: a post-processing step marked
torch.compiler.disable, which runs in eager mode between two graphs (line 30: its own time
is lost to the break), and an explicit torch._dynamo.graph_break() (line 32, almost free).
Expected: 2 break sites, 3 graphs; the break at line 30 costs about what
`postprocess` takes on its own, the one at line 32 a small fraction of it.
"""

import torch
from torch import nn


@torch.compiler.disable
def postprocess(h):
    # eager work the compiler never sees: a few matmuls, one op at a time
    for _ in range(4):
        h = torch.tanh(h @ h.T @ h) * 0.01
    return h


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc1 = nn.Linear(256, 256)
        self.fc2 = nn.Linear(256, 256)
        self.fc3 = nn.Linear(256, 10)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        h = postprocess(h)
        h = torch.relu(self.fc2(h))
        torch._dynamo.graph_break()
        return self.fc3(h).softmax(-1)


def get_model():
    return Model().eval()


def get_inputs():
    return (torch.randn(256, 256),)
