"""Waiting for the GPU's queued work at a measurement's boundary, without importing torch."""

from __future__ import annotations

import sys


def torch_sync() -> None:
    """``torch.cuda.synchronize()`` where this process already uses CUDA through torch, else nothing.

    Torch is never imported here.
    """
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()
