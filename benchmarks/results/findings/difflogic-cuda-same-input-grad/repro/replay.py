#!/usr/bin/env python
"""Replays this numoracle repro: logic_layer(batch=1, out_features=1, in_features=1) fp32 exact seed=0"""
import sys
from pathlib import Path

from numoracle.cli import main

sys.exit(main(["replay", str(Path(__file__).resolve().parent)]))
