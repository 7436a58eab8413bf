"""The module switches between train and eval mode between calls (as an evaluation step
inside a training loop does); BatchNorm behaves differently in each. Expected: 2 calls,
1 recompile: the guard on `training` failed. Expected: one graph per mode (to compile for
training only, run the evaluation calls on the uncompiled module).
"""

import torch
from torch import nn

model = nn.Sequential(nn.Linear(16, 16), nn.BatchNorm1d(16), nn.ReLU())


def get_input_sets():
    # A generator: the sweep runs each call before asking for the next one.
    x = torch.randn(8, 16)
    model.train()
    yield (x,)
    model.eval()
    yield (x,)
