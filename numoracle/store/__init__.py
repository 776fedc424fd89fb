"""Repros and the store that keeps them: a repro is a folder (``repro.json``,
``arrays.npz``, ``replay.py``) that ``numoracle replay PATH`` re-runs."""

from __future__ import annotations

from .repro import DEFAULT_STORE, Repro, load_repro, replay, save_repro

__all__ = ["DEFAULT_STORE", "Repro", "save_repro", "load_repro", "replay"]
