"""Named measurement windows: wall time, each GPU's energy, CPU and DRAM energy where readable.

What Zeus's ``ZeusMonitor`` measures, with the GPU energy read between the counter's updates.
NVML's energy counter advances once per update period (99.4 ms on an H200:
validation/nvidia-h200/energy-counter-updates.csv), so its raw difference over a window is off
by up to one update's energy. The monitor polls each GPU's counter every `POLL_S` in a thread
(`CounterPoller`, from its start to `close`) and takes a window's energy at the window's start
and end, interpolated between the updates around them (``"counter-interpolated"``); the end's
needs the update after it, which `end_window` waits for, at most `END_WAIT_S` (``wait=False``,
or no update in time: the raw difference, ``"counter-raw"``). The simulated GPU's counter is
exact (``"counter"``): at each reading it is run for the wall time since its last one, with the
monitor's ``sim_workload`` (None: idle). Windows are independent: any number may be open,
nested or overlapping.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpudvfs.errors import GpudvfsError, InputError
from gpudvfs.hardware.cuda_sync import torch_sync
from gpudvfs.hardware.device import Workload
from gpudvfs.hardware.energy_counter import POLL_S, CounterPoller
from gpudvfs.hardware.kinds import DEVICE_KINDS
from gpudvfs.hardware.nvml.bindings import import_pynvml
from gpudvfs.hardware.nvml.gpu import NvmlGpu
from gpudvfs.hardware.nvml.visible import visible_nvml_indices
from gpudvfs.hardware.rapl import POWERCAP, Rapl
from gpudvfs.hardware.simulated import SimulatedDevice
from gpudvfs.limits import is_count

#: How long `EnergyMonitor.end_window` waits at most for the counter's update after a window (s):
#: five update periods of an H200's.
END_WAIT_S = 0.5


@dataclass(frozen=True)
class WindowMeasurement:
    """What one window measured: energy by GPU index (those with a counter) and how each was read (module notes).

    ``cpu_joules`` and ``dram_joules`` are by CPU package, from RAPL; empty where not readable
    (`EnergyMonitor.notes`).
    """

    name: str
    time_s: float
    gpu_joules: dict[int, float]
    gpu_source: dict[int, str]
    cpu_joules: dict[int, float] = field(default_factory=dict)
    dram_joules: dict[int, float] = field(default_factory=dict)

    @property
    def total_joules(self) -> float:
        """GPUs, CPUs and DRAM together, J."""
        return sum(self.gpu_joules.values()) + sum(self.cpu_joules.values()) + sum(self.dram_joules.values())


@dataclass
class WindowHandle:
    """A window opened by `EnergyMonitor.window`: its measurement once the block is left."""

    name: str
    measurement: WindowMeasurement | None = None


@dataclass(frozen=True)
class _Reading:
    t: float
    gpu: dict[int, float]
    cpu: dict[int, float]
    dram: dict[int, float]


def _indices(gpu_indices: Sequence[int] | None, count: int | None, shown: str = "") -> list[int]:
    """The GPUs asked for, checked against the ``count`` shown (None: any), which ``shown`` says how."""
    if gpu_indices is None:
        return list(range(count or 0))
    if isinstance(gpu_indices, (str, bytes)) or not isinstance(gpu_indices, Sequence):
        raise InputError(f"gpu_indices: expected a list of GPU indices, got {gpu_indices!r}")
    out = list(gpu_indices)
    for i in out:
        if not is_count(i):
            raise InputError(f"gpu_indices: expected GPU indices (integers >= 0), got {i!r}")
        if count is not None and i >= count:
            raise InputError(f"gpu_indices: GPU {i} is not on this machine ({shown} {count}: "
                             f"{'none' if count == 0 else f'0..{count - 1}'})")
    if len(set(out)) != len(out):
        raise InputError(f"gpu_indices: each GPU once, got {out}")
    return out


def _visible(nv: Any) -> list[int]:
    """NVML's index of each GPU CUDA shows (`visible_nvml_indices`)."""
    nv.nvmlInit()
    try:
        return visible_nvml_indices(nv, int(nv.nvmlDeviceGetCount()))
    finally:
        nv.nvmlShutdown()


class EnergyMonitor:
    """Time and energy of named windows on GPUs, CPU packages and DRAM (module notes); no clock is set.

    Parameters
    ----------
    gpu_indices : sequence of int, optional
        GPUs as CUDA (torch) numbers them: ``CUDA_VISIBLE_DEVICES`` applied, as Zeus does; None:
        every GPU CUDA shows (none where NVML cannot be opened, which `notes` says), or GPU 0
        simulated. The measurements are keyed by these.
    device : str
        ``"nvml"`` or ``"sim"`` (a `SimulatedDevice` per index, seeded by it).
    rapl_root : str or pathlib.Path
        The powercap sysfs folder (tests pass a fake tree).
    sync : callable or None
        Called before each reading, so a window holds its GPU work (default: ``torch.cuda.synchronize``
        where torch already uses CUDA, else nothing).
    sim_workload : Workload, optional
        What the simulated GPUs run between readings (None: they idle).
    poll_interval : float
        Seconds between the counter polls of an NVML GPU.

    Raises
    ------
    InputError
        For a device other than `DEVICE_KINDS`, a GPU index the machine (or ``CUDA_VISIBLE_DEVICES``)
        lacks, an index given twice, or a poll interval that is not a finite number > 0.
    GpudvfsError
        Where ``gpu_indices`` are given and NVML cannot be opened.

    Examples
    --------
    >>> from gpudvfs.hardware import EnergyMonitor
    >>> with EnergyMonitor(device="sim", cpu=False) as monitor:
    ...     monitor.begin_window("epoch")
    ...     with monitor.window("step") as step:
    ...         pass  # one training step
    ...     epoch = monitor.end_window("epoch")
    >>> step.measurement.time_s <= epoch.time_s
    True
    >>> sorted(epoch.gpu_joules), epoch.gpu_source[0]
    ([0], 'counter')
    """

    def __init__(self, gpu_indices: Sequence[int] | None = None, *, device: str = "nvml", cpu: bool = True,
                 rapl_root: str | Path = POWERCAP, sync: Callable[[], None] | None = torch_sync,
                 sim_workload: Workload | None = None, pynvml: Any = None, poll_interval: float = POLL_S) -> None:
        if device not in DEVICE_KINDS:
            raise InputError(f"device: expected one of {DEVICE_KINDS}, got {device!r}")
        if not (isinstance(poll_interval, (int, float)) and math.isfinite(poll_interval) and poll_interval > 0):
            raise InputError(f"poll_interval: expected a finite number of seconds > 0, got {poll_interval!r}")
        self.sync, self.sim_workload = sync, sim_workload
        #: Why something is not measured: ``"gpu"``, ``"gpu N"``, ``"cpu"`` (RAPL) -> one line.
        self.notes: dict[str, str] = {}
        #: The GPUs read, by index: `NvmlGpu` or `SimulatedDevice` (whose clocks a test may set).
        self.gpus: dict[int, Any] = {}
        self._pollers: dict[int, CounterPoller] = {}
        self._sim_t: dict[int, float] = {}
        self._open: dict[str, _Reading] = {}
        self.rapl: Rapl | None = None
        try:
            if device == "sim":
                for i in _indices([0] if gpu_indices is None else gpu_indices, None):
                    self.gpus[i] = SimulatedDevice(seed=i)
                    self._sim_t[i] = time.perf_counter()
            else:
                self._open_nvml(gpu_indices, pynvml, float(poll_interval))
            if cpu:
                self.rapl = Rapl(rapl_root)
                if self.rapl.unavailable:
                    self.notes["cpu"] = self.rapl.unavailable
                self.rapl.start()
        except BaseException:
            self.close()
            raise

    def _open_nvml(self, gpu_indices: Sequence[int] | None, pynvml: Any, interval: float) -> None:
        try:
            nv = import_pynvml() if pynvml is None else pynvml
            visible = _visible(nv)
        except InputError:
            raise
        except Exception as e:  # no nvidia-ml-py, no driver
            why = f"NVML cannot be opened ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
            if gpu_indices is not None:
                raise GpudvfsError(f"gpu_indices {list(gpu_indices)}: {why}") from e
            self.notes["gpu"] = why
            return
        env = os.environ.get("CUDA_VISIBLE_DEVICES")
        shown = "NVML sees" if env is None else f"CUDA_VISIBLE_DEVICES={env!r} shows"
        for i in _indices(gpu_indices, len(visible), shown):
            gpu = self.gpus[i] = NvmlGpu(visible[i], nv)
            if not gpu.has_energy_counter:
                self.notes[f"gpu {i}"] = f"{gpu.name} has no energy counter (it needs Volta or newer)"
                continue
            poller = self._pollers[i] = CounterPoller(gpu.energy_joules, interval).start()
            poller.wait_past(-math.inf, END_WAIT_S)  # the first update: a window's start is read between two

    # readings
    def _gpu_energy(self, i: int, t: float) -> float | None:
        dev = self.gpus[i]
        if i in self._sim_t:
            dev.run(self.sim_workload, max(t - self._sim_t[i], 0.0))
            self._sim_t[i] = t
        return dev.energy_joules()

    def _reading(self) -> _Reading:
        if self.sync is not None:
            self.sync()
        t = time.perf_counter()
        gpu = {i: e for i in self.gpus if (e := self._gpu_energy(i, t)) is not None}
        cpu, dram = self.rapl.read() if self.rapl is not None else ({}, {})
        return _Reading(t, gpu, cpu, dram)

    # windows
    @property
    def open_windows(self) -> list[str]:
        """The windows begun and not ended, in the order begun."""
        return list(self._open)

    def begin_window(self, name: str) -> None:
        """Open a window; `InputError` where one of that name is open, or the name is not a non-empty string."""
        if not isinstance(name, str) or not name:
            raise InputError(f"begin_window: expected a window name (a non-empty string), got {name!r}")
        if name in self._open:
            raise InputError(f"begin_window({name!r}): a window of that name is already open; "
                             "end it first, or give this one another name")
        self._open[name] = self._reading()

    def _pop(self, name: str, call: str) -> _Reading:
        if name not in self._open:
            open_ = ", ".join(map(repr, self._open)) or "none"
            raise InputError(f"{call}({name!r}): no window of that name is open (open: {open_}); "
                             "begin_window it first")
        return self._open.pop(name)

    def end_window(self, name: str, *, wait: bool = True) -> WindowMeasurement:
        """Close a window and measure it; `InputError` where none of that name is open.

        ``wait`` waits (at most `END_WAIT_S`) for each NVML counter's update after the window's end, to
        read its energy between updates; False returns at once with the raw difference.
        """
        begun = self._pop(name, "end_window")
        end = self._reading()
        joules: dict[int, float] = {}
        source: dict[int, str] = {}
        for i, e1 in end.gpu.items():
            e0 = begun.gpu.get(i)
            if e0 is None:
                continue
            poller = self._pollers.get(i)
            interpolated = None
            if poller is not None and poller.error is None and (not wait or poller.wait_past(end.t, END_WAIT_S)):
                interpolated = poller.energy(begun.t, end.t)
            if poller is not None and poller.error is not None:
                self.notes.setdefault(f"gpu {i}", f"counter polling stopped: {type(poller.error).__name__}: "
                                                  f"{poller.error}")
            if interpolated is not None:
                joules[i], source[i] = interpolated, "counter-interpolated"
            else:
                joules[i], source[i] = e1 - e0, "counter" if poller is None else "counter-raw"
        return WindowMeasurement(
            name=name, time_s=end.t - begun.t, gpu_joules=joules, gpu_source=source,
            cpu_joules={k: v - begun.cpu[k] for k, v in end.cpu.items() if k in begun.cpu},
            dram_joules={k: v - begun.dram[k] for k, v in end.dram.items() if k in begun.dram})

    def cancel_window(self, name: str) -> None:
        """Close a window without measuring it; `InputError` where none of that name is open."""
        self._pop(name, "cancel_window")

    @contextmanager
    def window(self, name: str) -> Iterator[WindowHandle]:
        """A window around a ``with`` block, its ``measurement`` set when the block ends; an exception cancels it."""
        self.begin_window(name)
        handle = WindowHandle(name)
        try:
            yield handle
        except BaseException:
            self.cancel_window(name)
            raise
        handle.measurement = self.end_window(name)

    def close(self) -> None:
        """Stop the pollers and the RAPL wrap checks, and release NVML."""
        for poller in self._pollers.values():
            poller.stop()
        self._pollers.clear()
        if self.rapl is not None:
            self.rapl.close()
        for gpu in self.gpus.values():
            if isinstance(gpu, NvmlGpu):
                gpu.close()

    def __enter__(self) -> EnergyMonitor:
        """Use the monitor in a ``with`` block."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close it on the way out."""
        self.close()
