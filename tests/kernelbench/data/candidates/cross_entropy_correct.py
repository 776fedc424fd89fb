import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        logp = predictions - torch.logsumexp(predictions, dim=1, keepdim=True)
        return -logp.gather(1, targets[:, None]).mean()
