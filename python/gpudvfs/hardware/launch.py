"""Launch one workload once, in a process of its own: the target a profiler wraps.

    python -m gpudvfs.hardware.launch --kernel NAME [--params JSON] [--pci BUS_ID]
    python -m gpudvfs.hardware.launch --callable module:function [--pci BUS_ID]

Nsight Compute profiles whole processes, so `NvmlDevice.profile` runs this under ``ncu``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from contextlib import AbstractContextManager, nullcontext

from gpudvfs.hardware import kernels
from gpudvfs.hardware.device import Workload


def target_argv(workload: Workload, pci_bus_id: str | None = None) -> list[str]:
    """The command (Python first) that launches a workload once, in a process of its own, on the GPU at ``pci_bus_id``.

    ``workload`` is a manifest kernel, or an importable ``module:function`` given as its ``spec``;
    `ValueError` where it has neither.
    """
    base = [sys.executable, "-m", "gpudvfs.hardware.launch"]
    pci = ["--pci", pci_bus_id] if pci_bus_id else []
    if workload.kernel is not None:
        return base + ["--kernel", workload.kernel, "--params", json.dumps(dict(workload.params))] + pci
    if workload.spec is not None:
        return base + ["--callable", workload.spec] + pci
    raise ValueError(f"workload {workload.name!r}: a profiler needs a process that launches it: give a "
                     "manifest kernel, or an importable 'module:function' (Workload.spec, the workloads "
                     "file's 'callable')")


def main(argv: list[str] | None = None) -> None:
    """Launch the workload the command line (default: the process's) names, once."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--kernel")
    group.add_argument("--callable")
    ap.add_argument("--params", default="{}")
    ap.add_argument("--pci", help="PCI bus id of the GPU to run on (NVML and CUDA number GPUs differently)")
    a = ap.parse_args(argv)
    if a.kernel:
        with _cuda_device(a.pci):
            kernels.load(a.kernel, json.loads(a.params))()
        return
    module, _, name = a.callable.partition(":")
    fn = getattr(importlib.import_module(module), name)
    with callable_device(a.pci):
        fn()


def _cuda_device(pci: str | None) -> AbstractContextManager:
    import cupy

    return cupy.cuda.Device.from_pci_bus_id(pci) if pci else cupy.cuda.Device(0)


def callable_device(pci: str | None) -> AbstractContextManager:
    """The GPU at a PCI address (None: CUDA's first) as CuPy's current device, for a ``with`` block.

    NVML and CUDA number GPUs differently; the address names the same GPU in both. Without CuPy, a
    block that sets nothing (a callable on another framework chooses its GPU itself).
    """
    try:
        return _cuda_device(pci)
    except ImportError:
        return nullcontext()


if __name__ == "__main__":
    main()
