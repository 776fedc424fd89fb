"""WGSL targets: compute shaders dispatched through wgpu (WebGPU on Vulkan, Metal or D3D12).

A target is a shader (WGSL source text or a ``.wgsl`` file), its passes (an
entry point and a dispatch rule each, run in order in one submission), and a
**binding spec**: binding ``i`` of bind group 0 is entry ``i`` of ``bindings``,

``"x"``, ``"coef"``, ``"y"``
    an array of the op by name: an input is a ``var<storage, read>`` buffer of
    ``f32`` holding the case's array in its declared layout; an output a
    ``var<storage, read_write>`` buffer, poisoned with NaN before every case
    and read back after the passes (an element no invocation writes fails);
    an array that is an input and an output of the op starts as the input;
``["batch", "in_features", "spline_order", "=0:int32"]``
    a ``var<uniform>`` struct of 32-bit scalars, in order: dimensions and flags
    of the op's parameters (``u32``/``i32`` in the shader), ``"lr:float32"``
    number parameters and ``"=0.5:float32"`` constants (``f32``); the names
    are those of :mod:`numoracle.foreign.spec`.

An array the case does not have (``bias`` of a case without one) is bound to
a small zero buffer; its flag (``"param:bias"``) tells the shader. Every
parameter that shapes a bound array must be in a uniform, and the shader's
declarations must match the spec (storage read, read_write, uniform): both
are checked when the target is made, before any case, as is the shader's
compilation.

The dispatch rule of a pass is arithmetic over the op's parameters
(:mod:`numoracle.foreign.wgsl.dispatch`): ``("ceil(n / 16)", "ceil(m / 16)")``.

The precision claimed defaults to ``wgsl`` (:mod:`numoracle.foreign.wgsl.profile`):
fp32, every rounding to either neighbour, the WGSL accuracy table's elementwise
errors, subnormals possibly flushed; built-in ops and traced references alike
are judged under it.

A repro's spec file embeds the shader source, so ``numoracle replay`` runs the
same shader again, wherever wgpu finds an adapter.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...cases.layouts import shape_in
from ...errors import InvalidArgument
from ...oracle.ops import get_op
from ...oracle.precision import PrecisionModel, get_model
from ...targets.target import Target
from ..declare import declared_op, fixed_params, foreign_target, spec_params
from ..rebuild import write_source
from ..sharedlib import ForeignError
from ..spec import FLOAT_CTYPES, Arg, ArgSpec, ParamReader, array_names
from .dispatch import DispatchRule

__all__ = ["wgsl_target", "wgsl_unavailable", "adapter_description", "read_shader"]

#: bytes of the buffer bound where the case has no such array
_DUMMY_BYTES = 16


@functools.cache
def _gpu() -> tuple[Any, Any]:
    """The wgpu module and one device of the preferred adapter, made once per process."""
    import wgpu  # noqa: PLC0415 - an optional dependency (the ``wgsl`` extra)

    adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    if adapter is None:
        raise RuntimeError("wgpu found no adapter")
    return wgpu, adapter.request_device_sync(required_limits={
        "max-storage-buffers-per-shader-stage":
            adapter.limits["max-storage-buffers-per-shader-stage"]})


def wgsl_unavailable() -> str | None:
    """Why WGSL targets cannot run here (no ``wgpu`` package, no adapter), or None."""
    try:
        _gpu()
    except ImportError:
        return "the wgpu package is not installed (pip install 'numoracle[wgsl]')"
    except Exception as exc:  # noqa: BLE001 - any failure to find a device is a reason
        return (f"wgpu found no usable adapter ({type(exc).__name__}: {exc}); on Linux "
                "install a Vulkan driver (Debian: mesa-vulkan-drivers)")
    return None


def adapter_description() -> str:
    """The adapter WGSL targets run on (device, driver, backend), or why there is none."""
    reason = wgsl_unavailable()
    if reason is not None:
        return reason
    info = _gpu()[1].adapter.info
    return (f"{info.get('device', '?')} ({info.get('description', '')}; "
            f"{info.get('backend_type', '?')}, {info.get('adapter_type', '?')})")


def read_shader(shader: str | Path) -> tuple[str, str | None]:
    """The WGSL source text and its file (None for source given as text)."""
    if isinstance(shader, Path) or (isinstance(shader, str) and "\n" not in shader
                                    and shader.endswith(".wgsl")):
        path = Path(shader)
        if not path.is_file():
            raise InvalidArgument(f"shader file {str(shader)!r} does not exist; give a .wgsl "
                                  "file or the WGSL source text")
        return path.read_text(), str(path.resolve())
    if not isinstance(shader, str) or "@compute" not in shader:
        raise InvalidArgument(f"shader={str(shader)[:60]!r} must be WGSL source text with a "
                              "@compute entry point, or the path of a .wgsl file")
    return shader, None


def _parse_bindings(op: str, bindings: Any) -> tuple[list[Any], list[str]]:
    """``bindings`` checked: each an array name or a list of uniform fields;
    also the flat argument list the :class:`ArgSpec` validates."""
    if isinstance(bindings, (str, bytes, Mapping)) or not isinstance(bindings, Sequence) \
            or not bindings:
        raise InvalidArgument(f"bindings={bindings!r} must be a list with one entry per "
                              "binding: an array name ('x') or a list of uniform fields "
                              "(['batch', 'in_features'])")
    ins, outs = array_names(op)
    flat: list[str] = []
    out: list[Any] = []
    for i, b in enumerate(bindings):
        if isinstance(b, str):
            if b not in ins and b not in outs:
                raise InvalidArgument(
                    f"binding {i} {b!r} is not an array of {op} (inputs {ins}, outputs "
                    f"{outs}); put dimensions in a uniform: ['{b}'] as a list")
            out.append(b)
            flat.append(b)
        elif isinstance(b, Sequence) and b and all(isinstance(f, str) for f in b):
            arrays = [f for f in b if f in ins or f in outs]
            if arrays:
                raise InvalidArgument(f"binding {i} {list(b)!r}: a uniform holds scalars; "
                                      f"bind the arrays {arrays} as bindings of their own")
            out.append(list(b))
            flat.extend(b)
        else:
            raise InvalidArgument(f"binding {i} {b!r} must be an array name or a non-empty "
                                  "list of uniform field names")
    return out, flat


def _uniform_bytes(fields: Sequence[Arg], params: Mapping[str, Any]) -> bytes:
    """The uniform struct: 4 bytes a field, little-endian, padded to 16 bytes."""
    raw = bytearray()
    for a in fields:
        value = a.value if a.kind == "scalar" else a.dim_value(params)
        raw += struct.pack("<f", float(value)) if a.ctype in FLOAT_CTYPES \
            else struct.pack("<i", int(value))
    pad = -len(raw) % 16 if raw else 16
    return bytes(raw + bytes(pad))


class _Shader:
    """The function a WGSL target runs: buffers from the case, the passes, the outputs."""

    backend = "numpy"

    def __init__(self, spec: ArgSpec, source: str, bindings: list[Any],
                 passes: list[tuple[str, DispatchRule]], fixed: Mapping[str, Any]) -> None:
        self.foreign_spec = spec
        self.source, self.passes, self.fixed = source, passes, dict(fixed)
        self.reader = ParamReader(spec.op)
        self.op = get_op(spec.op)
        args = iter(spec.args)  # the spec lists the bindings' arrays and fields in order
        self.bindings: list[str | list[Arg]] = []
        for b in bindings:
            if isinstance(b, str):
                next(args)
                self.bindings.append(b)
                continue
            fields = [next(args) for _ in b]
            for a in fields:
                if a.kind == "stream" or a.ctype not in ("int32", "float32"):
                    raise InvalidArgument(
                        f"uniform field {a.text!r}: WGSL uniforms hold 32-bit scalars; write "
                        f"'{a.name}' (u32/i32) or '{a.name}:float32' (f32), no 64-bit types "
                        "and no stream")
            self.bindings.append(fields)
        self.compiled: tuple[Any, Any, list[Any]] | None = None

    def compile(self) -> tuple[Any, Any, list[Any]]:
        """The bind group layout and a pipeline per pass (InvalidArgument when the
        shader does not compile or does not declare the bindings as the spec does)."""
        if self.compiled is not None:
            return self.compiled
        wgpu, device = _gpu()
        spec = self.foreign_spec
        kinds = []
        for i, b in enumerate(self.bindings):
            kind = (wgpu.BufferBindingType.uniform if not isinstance(b, str)
                    else wgpu.BufferBindingType.storage if b in spec.outputs
                    else wgpu.BufferBindingType.read_only_storage)
            kinds.append({"binding": i, "visibility": wgpu.ShaderStage.COMPUTE,
                          "buffer": {"type": kind}})
        try:
            module = device.create_shader_module(code=self.source)
            layout = device.create_bind_group_layout(entries=kinds)
            pipeline_layout = device.create_pipeline_layout(bind_group_layouts=[layout])
            pipelines = [device.create_compute_pipeline(
                layout=pipeline_layout, compute={"module": module, "entry_point": entry})
                for entry, _ in self.passes]
        except wgpu.GPUError as exc:
            wanted = [f"@binding({i}) {_declaration(b, spec)}"
                      for i, b in enumerate(self.bindings)]
            raise InvalidArgument(
                f"the WGSL shader does not compile, or does not declare its bindings as the "
                f"spec does ({'; '.join(wanted)}) with the entry points "
                f"{[e for e, _ in self.passes]}: {exc}") from None
        self.compiled = (layout, pipelines, kinds)
        return self.compiled

    def __call__(self, **inputs: Any) -> dict[str, np.ndarray]:
        params = self.reader.read_fixed(inputs, self.fixed)
        wgpu, device = _gpu()
        layout, pipelines, _ = self.compile()
        spec = self.foreign_spec
        defined = self.op.outputs(params)
        out_shapes = self.op.output_shapes(params)
        usage = wgpu.BufferUsage
        entries, reads = [], {}
        for i, b in enumerate(self.bindings):
            if not isinstance(b, str):
                buf = device.create_buffer_with_data(data=_uniform_bytes(b, params),
                                                     usage=usage.UNIFORM)
            else:
                order, memory = spec.order_and_memory(b)
                if b in spec.outputs and b in defined:
                    shape = shape_in(out_shapes[b], spec.axes(b), order)
                    start = inputs.get(b) if b in spec.inouts else None
                    data = np.full(shape, np.nan, np.float32) if start is None else \
                        np.asarray(start, np.float32)
                    reads[b] = (i, shape, memory)
                    kind = usage.STORAGE | usage.COPY_SRC
                else:
                    arr = inputs.get(b)
                    data = None if arr is None else np.asarray(arr, np.float32)
                    kind = usage.STORAGE
                flat = None if data is None else np.ravel(data, order="F" if memory == "F"
                                                          else "C")
                if flat is None or flat.size == 0:
                    buf = device.create_buffer(size=_DUMMY_BYTES, usage=kind)
                else:
                    buf = device.create_buffer_with_data(data=flat.tobytes(), usage=kind)
            entries.append({"binding": i, "resource": {"buffer": buf, "offset": 0,
                                                      "size": buf.size}})
        limit = device.limits["max-compute-workgroups-per-dimension"]
        try:
            group = device.create_bind_group(layout=layout, entries=entries)
            encoder = device.create_command_encoder()
            for (entry, rule), pipeline in zip(self.passes, pipelines, strict=True):
                counts = rule.counts(params)
                if max(counts) > limit:
                    raise ForeignError(f"pass {entry!r}: dispatch {counts} exceeds the "
                                       f"adapter's {limit} workgroups per dimension")
                if min(counts) == 0:
                    continue
                cpass = encoder.begin_compute_pass()
                cpass.set_pipeline(pipeline)
                cpass.set_bind_group(0, group)
                cpass.dispatch_workgroups(*counts)
                cpass.end()
            device.queue.submit([encoder.finish()])
            out = {}
            for name, (i, shape, memory) in reads.items():
                n = int(np.prod(shape))
                raw = device.queue.read_buffer(entries[i]["resource"]["buffer"])
                flat = np.frombuffer(raw, np.float32)[:n] if n else np.zeros(0, np.float32)
                out[name] = flat.reshape(shape, order="F" if memory == "F" else "C").copy()
        except wgpu.GPUError as exc:
            raise ForeignError(f"wgpu reported an error running the shader: {exc}") from None
        return out


def _declaration(b: str | list[Arg], spec: ArgSpec) -> str:
    if not isinstance(b, str):
        return "var<uniform> (a struct of " + ", ".join(
            f"{a.name or a.text}: {'f32' if a.ctype in FLOAT_CTYPES else 'u32'}" for a in b) + ")"
    access = "read_write" if b in spec.outputs else "read"
    return f"var<storage, {access}> {b}: array<f32>"


def _passes(entry_point: str | None, dispatch: Any, passes: Any) -> list[tuple[str, DispatchRule]]:
    if passes is None:
        if dispatch is None:
            raise InvalidArgument("give dispatch= (the workgroup counts of entry_point, e.g. "
                                  "'ceil(batch / 64)') or passes= [(entry_point, dispatch), ...]")
        passes = [(entry_point or "main", dispatch)]
    elif dispatch is not None:
        raise InvalidArgument("give either dispatch= (one pass) or passes=, not both")
    if isinstance(passes, (str, Mapping)) or not isinstance(passes, Sequence) or not passes:
        raise InvalidArgument(f"passes={passes!r} must be a non-empty list of (entry_point, "
                              "dispatch) pairs, run in order")
    out = []
    for p in passes:
        entry, rule = (p["entry_point"], p["dispatch"]) if isinstance(p, Mapping) else p
        if not isinstance(entry, str) or not entry.isidentifier():
            raise InvalidArgument(f"entry point {entry!r} must be the name of a @compute "
                                  "function of the shader")
        out.append((entry, DispatchRule.parse(rule)))
    return out


def wgsl_target(
    shader: str | Path,
    *,
    op: str | None = None,
    bindings: Sequence[Any],
    entry_point: str = "main",
    dispatch: Any = None,
    passes: Sequence[Any] | None = None,
    precision: str | PrecisionModel | Mapping[str, Any] = "wgsl",
    layouts: Mapping[str, str] | str | None = None,
    name: str | None = None,
    params: Mapping[str, Any] | None = None,
    max_reduction: int | None = None,
    spec_dir: str | Path | None = None,
    source: str | None = None,
    reference: Any = None,
    inputs: Any = None,
    dims: Mapping[str, Any] | None = None,
    grads: Sequence[str] = (),
    claims: Mapping[str, Any] | None = None,
    traced: Mapping[str, Any] | None = None,
) -> Target:
    """A :class:`~numoracle.targets.target.Target` that runs a WGSL compute shader.

    Parameters
    ----------
    shader : str or Path
        WGSL source text, or the path of a ``.wgsl`` file (its text is kept in
        the repro).
    op : str or None
        The op the shader computes (``kan``, ``matmul``, ``linear``...); with
        ``reference``, the name of the traced op.
    bindings : sequence
        Binding ``i`` of group 0: an array name, or a list of uniform fields
        (module docstring).
    entry_point, dispatch : optional
        One pass: the ``@compute`` function and its workgroup counts
        (:mod:`~numoracle.foreign.wgsl.dispatch`).
    passes : sequence, optional
        Several passes, run in order: ``[(entry_point, dispatch), ...]``.
    precision : str, PrecisionModel or dict
        The claimed model; ``"wgsl"`` (default) is WGSL's f32 semantics.
    layouts : mapping or str, optional
        Layout of each array (``"C"``, ``"F"``, ``"OIHW:F"``...); row-major by default.
    name : str, optional
        Name in reports (default: the shader file's stem, or ``wgsl-<entry points>``).
    params : mapping, optional
        Op parameters the shader fixes: only such cases are drawn by
        :func:`numoracle.foreign.run`.
    max_reduction : int or None
        Longest reduction to test.
    spec_dir : path, optional
        Where the spec file that repros rebuild the target from goes.
    reference, inputs, dims, grads : optional
        A PyTorch reference that is the op (as for :func:`numoracle.check_kernel`).
    claims : mapping, optional
        The traced reference's further claims (``numoracle.oracle.traced.Claims(...)``).

    Raises
    ------
    InvalidArgument
        For a spec that does not fit the op, a shader that does not compile or
        does not declare the bindings the spec names: before any case.
    """
    text, path = read_shader(shader)
    model = get_model(precision)
    if model.storage.name != "fp32":
        raise InvalidArgument(f"precision {model.name!r} stores {model.storage}; WGSL targets "
                              "exchange f32 arrays: claim an fp32-stored model ('wgsl')")
    op = declared_op(op, what="the shader", reference=reference, inputs=inputs, dims=dims,
                     grads=grads, claims=claims, traced=traced)
    parsed, flat = _parse_bindings(op, bindings)
    spec = ArgSpec.build(op, flat, precision=model, layouts=layouts)
    if spec.stepped:
        raise InvalidArgument(f"bindings={list(bindings)!r}: a shader computes every step of "
                              f"{op} in one submission; bind 'steps' in a uniform")
    steps = _passes(entry_point, dispatch, passes)
    for _, rule in steps:  # names and arithmetic checked now, not at the first case
        rule.counts(spec_params(op))
    fixed = fixed_params(op, params)
    fn = _Shader(spec, text, parsed, steps, fixed)
    ok = wgsl_unavailable() is None
    if ok:
        fn.compile()  # a shader that does not compile is refused now, not per case
    entries = "+".join(e for e, _ in steps)
    name = name or (Path(path).stem if path else f"wgsl-{entries}")
    if source is None:
        top = get_op(op)
        record = {"kind": "wgsl", "shader": text, "shader_path": path, "op": op,
                  "bindings": parsed,
                  "passes": [{"entry_point": e, "dispatch": list(r.exprs)} for e, r in steps],
                  "precision": model.to_dict(), "layouts": dict(spec.layouts), "name": name,
                  "params": fixed or None, "max_reduction": max_reduction}
        spec_of = getattr(top, "spec", None)
        if callable(spec_of) and spec_of() is not None:
            record["traced"] = spec_of()
        source = write_source(record, spec_dir)
    where = adapter_description() if ok else "no adapter here"
    return foreign_target(spec, fn, name=name, backend="numpy", model=model,
                          max_reduction=max_reduction, source=source,
                          description=f"WGSL {entries} ({path or 'source text'}) on {where}",
                          available=wgsl_unavailable)
