#!/usr/bin/env python
"""Replays this numoracle repro: matmul(m=1, k=1, n=1, batch_shape=()) fp32 exact seed=0"""
import sys
from pathlib import Path

from numoracle.cli import main

sys.exit(main(["replay", str(Path(__file__).resolve().parent)]))
