"""WGSL compute shaders as targets (through wgpu), and WGSL's float semantics as a claim.

* :func:`wgsl_target`: a shader, its passes (entry point and dispatch rule) and
  a binding spec naming the op's arrays and its dimensions (uniforms);
* :data:`WGSL_MODEL`: the ``wgsl`` precision model (``get_model("wgsl")``), and
  the WGSL specification's accuracy table for ``f32`` it claims
  (:data:`WGSL_F32_ACCURACY`).
"""

from __future__ import annotations

from .dispatch import DispatchRule
from .profile import NOT_CLAIMED, WGSL_F32_ACCURACY, WGSL_MODEL, wgsl_model
from .target import adapter_description, read_shader, wgsl_target, wgsl_unavailable

__all__ = ["wgsl_target", "wgsl_unavailable", "adapter_description", "read_shader",
           "DispatchRule", "WGSL_MODEL", "WGSL_F32_ACCURACY", "NOT_CLAIMED", "wgsl_model"]
