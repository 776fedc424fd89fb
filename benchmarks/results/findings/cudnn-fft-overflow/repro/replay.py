#!/usr/bin/env python
"""Replays this numoracle repro: conv2d(batch=61, in_channels=64, out_channels=16, height=7, width=7, kernel_size=(7, 7), stride=(1, 1), padding=(3, 3), dilation=(1, 1), groups=1, bias=True) fp32 exact seed=0 +2 special grad_output:S weight:S x:S"""
import sys
from pathlib import Path

from numoracle.cli import main

sys.exit(main(["replay", str(Path(__file__).resolve().parent)]))
