"""The bug zoo: deliberately broken kernels the oracle must catch."""
