"""A recurrent module (nn.GRU) in the model: Dynamo breaks the graph at the call unless
torch._dynamo.config.allow_rnn is set.

Breaks at line 21 (GB0014; 2.15: GB0148).
"""

import torch
from torch import nn


class Tagger(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.emb = nn.Embedding(50, 8)
        self.gru = nn.GRU(8, 16, batch_first=True)
        self.head = nn.Linear(16, 4)

    def forward(self, tokens):
        x = self.emb(tokens)
        h, _ = self.gru(x)  # <- graph break
        return self.head(h)


def get_model():
    return Tagger()


def get_inputs():
    return (torch.randint(0, 50, (2, 7)),)
