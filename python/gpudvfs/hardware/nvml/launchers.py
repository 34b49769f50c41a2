"""Launching a workload on an NVML GPU: the default *launcher*.

A launcher is a callable that takes a `Workload` and returns a zero-argument function that
launches the work once and waits for it. The default one loads microbenchmarks with
`gpudvfs.hardware.kernels` on CuPy and calls ``workload.fn`` as is, both on the GPU NVML
names (CUDA may number GPUs differently). A launch function may return the launch's GPU time
in milliseconds (e.g. from CUDA events); one with a ``result()`` method (the default
launcher's, for microbenchmarks) gives what its last launch measured.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpudvfs.errors import InputError
from gpudvfs.hardware import kernels
from gpudvfs.hardware.device import Workload
from gpudvfs.hardware.launch import callable_device

#: Launches the work once and waits for it; may return the launch's GPU time in ms.
LaunchFn = Callable[[], "float | None"]
#: Maps a workload to its launch function.
Launcher = Callable[[Workload], LaunchFn]


class OnDevice:
    """A benchmark loaded on ``cuda_device``, launched with it as CuPy's current device."""

    def __init__(self, run: Any, cuda_device: Any) -> None:
        self._run, self._device = run, cuda_device

    def __call__(self) -> None:
        """Launch once and wait."""
        with self._device:
            self._run()  # a loaded benchmark launches once and waits for its stream

    def result(self) -> dict[str, float]:
        """The benchmark's readings of its last launch (empty for one that measures nothing)."""
        if not getattr(self._run, "measures", False):
            return {}
        with self._device:
            return dict(self._run.result())


def default_launcher(workload: Workload, pci_bus_id: str) -> LaunchFn:
    """The launch-and-wait function of a workload on the GPU at a PCI address.

    A manifest kernel is loaded on CuPy (`ImportError` without it); a callable is called with CuPy's
    current device set to the GPU, where CuPy is installed. `InputError` where the workload has
    neither (counters describe a workload to the simulated GPU alone).
    """
    if workload.fn is not None:
        fn, where = workload.fn, callable_device(pci_bus_id)

        def launch_fn() -> None:
            with where:  # CuPy's current device is this GPU
                fn()  # by the Workload contract it launches and waits; its result is not a time

        return launch_fn
    if workload.kernel is None:
        raise InputError(f"workload {workload.name!r} has only 'counters': nothing to launch on a real GPU")
    try:
        import cupy
    except ImportError as exc:
        raise ImportError("kernel workloads need CuPy: pip install cupy-cuda12x "
                          "(or gpudvfs[measure])") from exc
    cuda_device = cupy.cuda.Device.from_pci_bus_id(pci_bus_id)
    with cuda_device:  # kernels.load compiles and allocates on the current device
        run = kernels.load(workload.kernel, dict(workload.params))
    return OnDevice(run, cuda_device)
