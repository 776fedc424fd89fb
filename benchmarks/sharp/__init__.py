"""Sharpness beyond the table of :mod:`benchmarks.commands.sharpness`: one real
library kernel's outputs kept and judged under several claims."""
