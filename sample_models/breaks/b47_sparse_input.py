"""A graph convolution fed a sparse adjacency matrix, as pytorch/examples' GCN: Dynamo
does not trace a sparse tensor, so the model breaks where it first reads one.

Breaks at line 20 (GB0015).
"""

import torch
from torch import nn


class GraphConv(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(8, 8)
        self.head = nn.Linear(8, 3)

    def forward(self, x, adj):
        h = self.lin(x)
        h = torch.sparse.mm(adj, h)  # <- graph break
        return self.head(torch.relu(h))


def get_model():
    return GraphConv()


def get_inputs():
    g = torch.Generator().manual_seed(0)
    adj = (torch.rand(6, 6, generator=g) < 0.3).float() + torch.eye(6)
    return (torch.randn(6, 8, generator=g), adj.to_sparse())
