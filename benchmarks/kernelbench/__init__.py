"""The KernelBench judge's benchmarks (``python -m benchmarks kernelbench ...``):
the census of what the traced oracle judges, the soundness of the judge on each
problem's own ``Model``, and a table of mutants beside KernelBench's own rule."""
