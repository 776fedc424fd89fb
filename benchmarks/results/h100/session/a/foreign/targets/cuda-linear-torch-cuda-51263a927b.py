"""numoracle foreign target 'cuda-linear-torch-cuda': rebuilt from this spec by `numoracle replay`."""
import json

from numoracle.foreign import from_spec

SPEC = json.loads(r"""{
  "args": [
    "x",
    "weight",
    "bias",
    "grad_output",
    "y",
    "grad_input",
    "grad_weight",
    "batch:int32",
    "in_features:int32",
    "out_features:int32",
    "stream"
  ],
  "backend": "torch-cuda",
  "device": "cuda",
  "error_symbol": "linear_last_error",
  "isolate": false,
  "kind": "shared_library",
  "layouts": {},
  "max_reduction": null,
  "name": "cuda-linear-torch-cuda",
  "op": "linear",
  "path": "/tmp/tmp.gh7HdQWE9g/liblinear_cuda.so",
  "precision": {
    "accumulate": "fp32",
    "accumulate_rounding": "rne",
    "algorithms": [
      "summation"
    ],
    "alpha": 1e-06,
    "bias_after_store": false,
    "compute": "fp32",
    "deterministic_runs": false,
    "flush_subnormal_inputs": false,
    "input_rounding": "rne",
    "inputs_maybe_unrounded": false,
    "name": "fp32",
    "order": "any",
    "probabilistic": false,
    "storage": "fp32"
  },
  "returns": "status",
  "symbol": "linear_f32_cuda",
  "timeout": 60.0
}""")
TARGETS = (from_spec(SPEC, source=__file__),)
