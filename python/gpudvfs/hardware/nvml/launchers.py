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
    """A loaded benchmark launched on its GPU (CuPy's current device while it runs).

    Parameters
    ----------
    run : LoadedBenchmark
        The benchmark, loaded on ``cuda_device``.
    """

    def __init__(self, run: Any, cuda_device: Any) -> None:
        self._run, self._device = run, cuda_device

    def __call__(self) -> None:
        """Launch once and wait."""
        with self._device:
            self._run()  # a loaded benchmark launches once and waits for its stream

    def result(self) -> dict[str, float]:
        """What the last launch measured.

        Returns
        -------
        dict
            The benchmark's readings (empty for a benchmark that measures nothing).
        """
        if not getattr(self._run, "measures", False):
            return {}
        with self._device:
            return dict(self._run.result())


def default_launcher(workload: Workload, pci_bus_id: str) -> LaunchFn:
    """The launch function of a workload on the GPU at a PCI address.

    Parameters
    ----------
    workload : Workload
        A manifest kernel (loaded on CuPy) or a callable (called with CuPy's current device set
        to the GPU, where CuPy is installed).
    pci_bus_id : str
        The GPU's PCI address.

    Returns
    -------
    callable
        Launches the workload once and waits.

    Raises
    ------
    InputError
        Where the workload has neither a kernel nor a callable (counters describe a workload to
        the simulated GPU alone).
    ImportError
        Where a kernel workload finds no CuPy.
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
