import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return nn.Parameter(torch.relu(x), requires_grad=False)
