"""A small training script, written as training scripts are (no compilediag convention):
diagnose it as it runs with

    compilediag run -- python examples/train.py
    compilediag run --profile-steps 3-7 -- python examples/train.py --epochs 1

What compilediag finds in it, and torch agrees (tests/cli/test_run.py):
- a graph break at line 28 (a data-dependent check that fails fast on NaNs);
- a recompile in the last batch of each epoch: 1000 samples in batches of 64 leave 40.
"""

import argparse

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(32, 64)
        self.fc2 = nn.Linear(64, 4)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        if not torch.isfinite(h).all():  # fail fast on a diverged run
            raise FloatingPointError("non-finite activations")
        return self.fc2(h)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()

    torch.manual_seed(0)
    data = TensorDataset(torch.randn(args.samples, 32), torch.randint(0, 4, (args.samples,)))
    loader = DataLoader(data, batch_size=args.batch_size, shuffle=True)
    model = Net().to(args.device)
    compiled = torch.compile(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(args.epochs):
        for x, y in loader:
            x, y = x.to(args.device), y.to(args.device)
            opt.zero_grad()
            loss = F.cross_entropy(compiled(x), y)
            loss.backward()
            opt.step()
        print(f"epoch {epoch}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
