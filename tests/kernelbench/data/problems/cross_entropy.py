import torch
import torch.nn as nn


class Model(nn.Module):
    """Cross-entropy of a batch of logits against integer labels (KernelBench's first
    release: the logits' shape is computed from num_classes at module level)."""

    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return torch.nn.functional.cross_entropy(predictions, targets)


batch_size = 16
num_classes = 10
input_shape = (num_classes, )  # Output for each class
dim = 1


def get_inputs():
    return [torch.randn(batch_size, *input_shape), torch.randint(0, num_classes, (batch_size,))]


def get_init_inputs():
    return []
