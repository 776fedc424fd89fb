import torch
import torch.nn as nn


class Model(nn.Module):
    """BatchNorm2d in train mode: batch statistics."""

    def __init__(self, num_features):
        super().__init__()
        self.bn = nn.BatchNorm2d(num_features)

    def forward(self, x):
        return self.bn(x)


batch_size = 4
features = 3
dim1 = 5
dim2 = 6


def get_inputs():
    return [torch.rand(batch_size, features, dim1, dim2)]


def get_init_inputs():
    return [features]
