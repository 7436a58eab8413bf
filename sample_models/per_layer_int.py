"""Each layer keeps a different Python int (its index) and prints inside forward.

The print breaks the graph inside the layer, so every layer's forward runs as its own
compiled frame, and Dynamo specialises on `self.layer_id`: each new layer fails the guard
`self.layer_id == 0` (then `== 1`, ...). Expected: 4 layers, 3 recompiles of Layer.forward;
Stack.forward itself is skipped (a graph break in a loop). Fix: make the int a buffer/tensor, or drop the break.
"""

import torch
from torch import nn


class Layer(nn.Module):
    def __init__(self, layer_id: int) -> None:
        super().__init__()
        self.layer_id = layer_id
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        x = self.fc(x) * (self.layer_id + 1)
        print("layer", self.layer_id)
        return x.relu()


class Stack(nn.Module):
    def __init__(self, n: int = 4) -> None:
        super().__init__()
        self.layers = nn.ModuleList(Layer(i) for i in range(n))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def get_model():
    return Stack()


def get_inputs():
    return (torch.randn(4, 16),)
