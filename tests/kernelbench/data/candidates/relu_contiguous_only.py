import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Right on contiguous inputs; refuses others with a clear error."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        if not x.is_contiguous():
            raise ValueError("Tensors must be contiguous")
        return torch.clamp(x, min=0.0)
