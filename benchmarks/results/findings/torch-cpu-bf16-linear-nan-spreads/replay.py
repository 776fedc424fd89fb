#!/usr/bin/env python
"""Replays this numoracle repro: linear(batch=17, in_features=17, out_features=31, bias=False) bf16 special seed=123 weight:F x:F"""
import sys
from pathlib import Path

from numoracle.cli import main

sys.exit(main(["replay", str(Path(__file__).resolve().parent)]))
