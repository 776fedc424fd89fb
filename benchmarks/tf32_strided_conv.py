"""Does cuDNN's TF32 conv2d read outside a strided input's elements?

    python benchmarks/tf32_strided_conv.py [--out FILE.json]

The soundness sweep found NaN in TF32 conv2d outputs only when the inputs were
non-contiguous views (every other element of a buffer whose gaps hold NaN).
This probe makes the same views by hand, with NaN or with 0 in the gaps, and
compares TF32 on/off and strided/contiguous for a few geometries.
"""

from __future__ import annotations

import argparse
import json

import torch
import torch.nn.functional as F


def strided(t: torch.Tensor, gap: float) -> torch.Tensor:
    buf = torch.full(t.shape[:-1] + (2 * t.shape[-1],), gap, dtype=t.dtype, device=t.device)
    view = buf[..., ::2]
    view.copy_(t)
    return view


def run(case: dict, tf32: bool, layout: str, gap: float) -> dict:
    g = torch.Generator().manual_seed(0)
    n, c, h, w, o, kh, kw, groups = (case[k] for k in ("n", "c", "h", "w", "o", "kh", "kw", "groups"))
    x = torch.randn(n, c, h, w, generator=g).cuda()
    wt = torch.randn(o, c // groups, kh, kw, generator=g).cuda()
    if layout == "S":
        x, wt = strided(x, gap), strided(wt, gap)
    old = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = tf32
    try:
        y = F.conv2d(x, wt, groups=groups)
    finally:
        torch.backends.cudnn.allow_tf32 = old
    ref = F.conv2d(x.double().contiguous(), wt.double().contiguous(), groups=groups)
    return {"nan": int(torch.isnan(y).sum()), "elements": y.numel(),
            "max_abs_err": float((y.double() - ref).abs().nan_to_num(0.0).max())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    cases = [
        {"n": 2, "c": 12, "h": 1, "w": 2, "o": 8, "kh": 1, "kw": 2, "groups": 4},
        {"n": 2, "c": 12, "h": 1, "w": 2, "o": 8, "kh": 1, "kw": 2, "groups": 1},
        {"n": 7, "c": 9, "h": 31, "w": 7, "o": 12, "kh": 1, "kw": 3, "groups": 3},
        {"n": 4, "c": 16, "h": 16, "w": 16, "o": 16, "kh": 3, "kw": 3, "groups": 1},
    ]
    rows = []
    for case in cases:
        for tf32 in (False, True):
            for layout, gap in (("C", 0.0), ("S", float("nan")), ("S", 0.0)):
                r = {"case": case, "tf32": tf32, "layout": layout, "gap": repr(gap),
                     **run(case, tf32, layout, gap)}
                rows.append(r)
                print(r, flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
                       "gpu": torch.cuda.get_device_name(0), "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
