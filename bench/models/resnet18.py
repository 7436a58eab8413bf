"""torchvision's ResNet-18 (random weights, nothing downloaded), batch 32 at 224x224:
a conv net with enough GPU work per call to be GPU-bound. Needs torchvision."""

import torch
from torchvision.models import resnet18


def get_model():
    torch.manual_seed(0)
    return resnet18(num_classes=1000).eval()


def get_inputs():
    return (torch.randn(32, 3, 224, 224),)
