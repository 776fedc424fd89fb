import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """Right but for the last row of the batch (a tail block left half-done)."""

    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        out = F.gelu(self.linear(x)) * self.scale
        out[-1] = out[-1] * 0.5
        return out
