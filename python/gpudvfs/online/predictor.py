"""Saving and loading online predictors, so a governor restarts without relearning.

The predictors themselves live in the Rust core (``OnlinePredictor``: one stream;
``OnlinePredictorBank``: many). Their ``state()`` is plain data and ``from_state`` checks it;
they also pickle. The files here are versioned JSON.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gpudvfs._core import OnlinePredictor, OnlinePredictorBank
from gpudvfs.data.jsonfile import read_json, write_json_atomic
from gpudvfs.errors import InputError

VERSION = 1
_KINDS: dict[str, type[OnlinePredictor] | type[OnlinePredictorBank]] = {
    "online-predictor": OnlinePredictor, "online-predictor-bank": OnlinePredictorBank}


def save_predictor(predictor: OnlinePredictor | OnlinePredictorBank, path: str | Path) -> None:
    """Write a predictor's or a bank's complete state, atomically (a crash leaves the old file)."""
    kind = {OnlinePredictor: "online-predictor", OnlinePredictorBank: "online-predictor-bank"}.get(type(predictor))
    if kind is None:
        raise InputError(f"save_predictor: expected an OnlinePredictor or OnlinePredictorBank, got {type(predictor)}")
    state = {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in predictor.state().items()}
    write_json_atomic(path, {"kind": kind, "version": VERSION, "state": state})


def load_predictor(path: str | Path) -> OnlinePredictor | OnlinePredictorBank:
    """A predictor or bank saved by :func:`save_predictor`, checked.

    Raises `InputError` if the file is not a predictor of this version, or its state fails the
    checks (shapes, finite values, a symmetric positive definite covariance).
    """
    doc = read_json(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("kind"), str) or doc["kind"] not in _KINDS:
        raise InputError(f"{path}: not a gpudvfs online predictor file")
    if doc.get("version") != VERSION:
        raise InputError(f"{path}: unknown {doc['kind']} file version {doc.get('version')!r}; "
                         f"this gpudvfs reads version {VERSION}")
    if not isinstance(doc.get("state"), dict):
        raise InputError(f"{path}: the file has no state object")
    try:
        return _KINDS[doc["kind"]].from_state(doc["state"])
    except (ValueError, TypeError, OverflowError) as e:
        raise InputError(f"{path}: {e}") from None
