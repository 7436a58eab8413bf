"""torchvision's ResNet-18 at batch 256 (224x224): GPU-bound even on a slow host, where
batch 32 is not (its eager wall per call exceeds its device time). Needs torchvision."""

import torch
from resnet18 import get_model  # noqa: F401 - the same model, more work per call


def get_inputs():
    return (torch.randn(256, 3, 224, 224),)
