"""Repros and the store that keeps them: a repro is a folder (``repro.json``,
``arrays.npz``, ``replay.py``) that ``numoracle replay PATH`` re-runs.

The store holds data; running a repro's kernel again is
:mod:`numoracle.checking.replay`'s (checking imports the store, never the
other way)."""

from __future__ import annotations

from .repro import DEFAULT_STORE, Repro, load_repro, save_repro

__all__ = ["DEFAULT_STORE", "Repro", "save_repro", "load_repro"]
