#!/usr/bin/env python
"""Replays this numoracle repro: matmul(m=31, k=33, n=5, batch_shape=()) bf16 exact seed=0 +1 special"""
import sys
from pathlib import Path

from numoracle.cli import main

sys.exit(main(["replay", str(Path(__file__).resolve().parent)]))
