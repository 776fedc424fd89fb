"""Does one huge or infinite input poison cuDNN conv2d outputs outside its receptive field?

    python benchmarks/tf32_large_value_conv.py [--out FILE.json]

The soundness sweep found NaN in TF32 conv2d outputs whose exact value is
finite, in cases holding very large finite inputs (about 1.3e36) elsewhere.
This probe puts one such value (or an Inf) into group 0 of a grouped convolution
and counts non-finite outputs in the other groups (which never read it), TF32 on
and off.
"""

from __future__ import annotations

import argparse
import json

import torch
import torch.nn.functional as F


def probe(n: int, c: int, h: int, w: int, o: int, k: tuple[int, int], groups: int,
          big: float, tf32: bool) -> dict:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(n, c, h, w, generator=g)
    wt = torch.randn(o, c // groups, *k, generator=g)
    x[0, 0, 0, 0] = big  # channel 0 belongs to group 0 only
    old = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = tf32
    try:
        y = F.conv2d(x.cuda(), wt.cuda(), groups=groups).cpu()
    finally:
        torch.backends.cudnn.allow_tf32 = old
    other = y[:, o // groups:]  # output channels of groups 1.. never read channel 0
    return {"shape": [n, c, h, w, o, *k, groups], "big": big, "tf32": tf32,
            "nonfinite_other_groups": int((~torch.isfinite(other)).sum()),
            "other_group_outputs": other.numel()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    rows = [probe(*shape, big=big, tf32=tf32)  # type: ignore[misc]
            for shape in ((2, 12, 1, 2, 8, (1, 2), 4), (7, 9, 31, 7, 12, (1, 3), 3),
                          (4, 16, 16, 16, 16, (3, 3), 4))
            for big in (float("inf"), 1.3e36, 1e20) for tf32 in (False, True)]
    for r in rows:
        print(r, flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
                       "gpu": torch.cuda.get_device_name(0), "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
