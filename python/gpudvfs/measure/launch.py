"""Launch one workload once, in a process of its own: the target a profiler wraps.

    python -m gpudvfs.measure.launch --kernel NAME [--params JSON] [--pci BUS_ID]
    python -m gpudvfs.measure.launch --callable module:function

Nsight Compute profiles whole processes, so `NvmlDevice.profile` runs this under ``ncu``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys

from .device import Workload


def target_argv(workload: Workload, pci_bus_id: str | None = None) -> list[str]:
    """The command that launches ``workload`` once (manifest kernel, or an importable
    ``module:function`` given as ``workload.spec``)."""
    base = [sys.executable, "-m", "gpudvfs.measure.launch"]
    if workload.kernel is not None:
        argv = base + ["--kernel", workload.kernel, "--params", json.dumps(dict(workload.params))]
        return argv + (["--pci", pci_bus_id] if pci_bus_id else [])
    if workload.spec is not None:
        return base + ["--callable", workload.spec]
    raise ValueError(f"workload {workload.name!r}: a profiler needs a process that launches it: give a "
                     "manifest kernel, or an importable 'module:function' (Workload.spec, the workloads "
                     "file's 'callable')")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--kernel")
    group.add_argument("--callable")
    ap.add_argument("--params", default="{}")
    ap.add_argument("--pci", help="PCI bus id of the GPU to run on (NVML and CUDA number GPUs differently)")
    a = ap.parse_args(argv)
    if a.kernel:
        import cupy

        from . import kernels

        device = cupy.cuda.Device.from_pci_bus_id(a.pci) if a.pci else cupy.cuda.Device(0)
        with device:
            kernels.load(a.kernel, json.loads(a.params))()
    else:
        module, _, name = a.callable.partition(":")
        getattr(importlib.import_module(module), name)()


if __name__ == "__main__":
    main()
