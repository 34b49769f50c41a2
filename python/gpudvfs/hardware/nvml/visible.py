"""The GPUs CUDA shows this process (``CUDA_VISIBLE_DEVICES``), as NVML's indices.

Torch's ``cuda:i`` is the i-th GPU that ``CUDA_VISIBLE_DEVICES`` lists (SLURM and most
launchers set it), where NVML numbers every GPU of the machine. Entries are NVML's indices or
UUIDs (``GPU-...``, a unique prefix is enough). CUDA's own order without the variable
(``CUDA_DEVICE_ORDER``, fastest first by default) may differ from NVML's PCI order; it is not
read here.
"""

from __future__ import annotations

import os
from typing import Any

from gpudvfs.errors import InputError
from gpudvfs.hardware.nvml.bindings import text


def visible_nvml_indices(nv: Any, count: int) -> list[int]:
    """NVML's index of each GPU CUDA shows, in CUDA's order (position i: CUDA's GPU i); all ``count`` where unset.

    ``nv`` is the NVML bindings, initialised. `InputError` where an entry is no GPU of this machine, a
    MIG instance, or given twice.
    """
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is None:
        return list(range(count))
    out: list[int] = []
    uuids: list[str] | None = None
    for entry in (e.strip() for e in env.split(",") if e.strip()):
        where = f"CUDA_VISIBLE_DEVICES={env!r}: {entry!r}"
        if entry.isdigit():
            index = int(entry)
            if index >= count:
                raise InputError(f"{where} is no GPU of this machine (NVML sees {count})")
        elif entry.startswith("GPU-"):
            if uuids is None:
                uuids = [text(nv.nvmlDeviceGetUUID(nv.nvmlDeviceGetHandleByIndex(i))) for i in range(count)]
            matches = [i for i, u in enumerate(uuids) if u.startswith(entry)]
            if len(matches) != 1:
                raise InputError(f"{where} matches {len(matches)} GPUs of this machine; expected one")
            index = matches[0]
        else:
            raise InputError(f"{where}: expected a GPU index or UUID (GPU-...); MIG instances are not measured")
        if index in out:
            raise InputError(f"{where} is listed twice")
        out.append(index)
    return out
