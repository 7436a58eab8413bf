"""Pairwise distances on the hyperboloid (the Lorentz model), for points far from the origin.

Eager's acosh of ~1e29 is 67; Inductor's vectorized acosh (CPU) squares its argument and
overflows to inf at line 16, and `d - d.mean()` then makes NaN: compiled only.
"""

import torch


class LorentzDistance(torch.nn.Module):
    """Pairwise distances between points on the hyperboloid, each row centred (the logits
    of a contrastive loss)."""

    def forward(self, x, y):
        inner = x[:, :1] @ y[:, :1].T - x[:, 1:] @ y[:, 1:].T
        d = torch.acosh(inner.clamp(min=1.0))
        return d - d.mean(-1, keepdim=True)


def _points(r, u):
    u = u / u.norm(dim=-1, keepdim=True)
    return torch.cat([torch.cosh(r), torch.sinh(r) * u], dim=-1)


def get_model():
    return LorentzDistance()


def get_inputs():
    g = torch.Generator().manual_seed(0)
    r = 30 + 8 * torch.rand(64, 1, generator=g)  # far from the origin
    u = torch.randn(64, 3, generator=g)
    return (_points(r, u), _points(r.flip(0), -u))
