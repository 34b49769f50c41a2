"""NVML's Python bindings: imported on first use, and read alike across driver versions.

NVML comes from the PyPI package ``nvidia-ml-py`` (module ``pynvml``; not the unofficial
``pynvml`` package), imported only when a device is opened, so gpudvfs imports without it.
"""

from __future__ import annotations

import math
from typing import Any

from gpudvfs.errors import GpudvfsError, InputError

# nvmlFieldValue_t.valueType -> the member of its value union.
FIELD_VALUE = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}


class ClockControlError(GpudvfsError, RuntimeError):
    """The GPU cannot be set to the requested clocks (not a permission problem)."""


def import_pynvml() -> Any:
    """Import nvidia-ml-py's ``pynvml``; `ImportError` where it is not installed, saying how to install it."""
    try:
        import pynvml
    except ImportError as exc:
        raise ImportError(
            "NvmlDevice needs NVML's Python bindings: pip install nvidia-ml-py "
            "(or gpudvfs[measure])"
        ) from exc
    return pynvml


def unsupported(nv: Any) -> tuple[type[BaseException], ...]:
    """The NVML exception classes that mean "this GPU or driver cannot do that" (FunctionNotFound too)."""
    return (nv.NVMLError_NotSupported, nv.NVMLError_FunctionNotFound)


def field_number(value: Any) -> float:
    """The number a successful ``nvmlFieldValue_t`` holds, from the member of its value union its type names."""
    return float(getattr(value.value, FIELD_VALUE[value.valueType]))


def text(value: bytes | str) -> str:
    """A string NVML returns, as ``str`` (older bindings return bytes)."""
    return value.decode() if isinstance(value, bytes) else str(value)


def whole_mhz(value: float, arg: str) -> int:
    """A clock in MHz as the whole number NVML takes; `InputError` naming ``arg`` where it is not one."""
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{arg}: expected a clock in MHz, got {value!r}") from None
    if not math.isfinite(f) or f <= 0 or f != int(f):
        raise InputError(f"{arg}: expected a positive whole number of MHz, got {value!r}")
    return int(f)
