"""The traced oracle's benchmarks (``python -m benchmarks traced ...``): the
soundness sweep of torch running one reference per op family, the cost of a
traced reference, the census of the rule library's coverage, the rules' own
cases judged on fresh inputs, and the traced zoo."""
