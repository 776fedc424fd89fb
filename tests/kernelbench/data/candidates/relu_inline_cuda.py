"""A CUDA extension built inline at import (as KernelBench's candidates are): where the
machine has no CUDA toolkit (or no ninja) it cannot be built, which is not the
candidate's fault."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_relu = load_inline(
    name="numoracle_test_relu_inline",
    cpp_sources="torch::Tensor relu(torch::Tensor x);",
    cuda_sources="""
__global__ void relu_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
torch::Tensor relu(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
""",
    functions=["relu"])


class ModelNew(nn.Module):
    def forward(self, x):
        return _relu.relu(x.contiguous())
