"""The analytical kernel-time model of Wang & Chu under core and memory frequency scaling.

Counters profiled once at a reference configuration (:class:`KernelProfile`) and device
parameters from microbenchmarks (:class:`TimeDevice`) give the time of a kernel at any
(fc, fm) (:class:`TimeModel`, batched in the Rust core, `rust/src/time/`). The module
documentation of `rust/src/time/mod.rs` lists every resolution of the paper's ambiguities
(Table II's columns, Eq. 5a's double fc/fm, Eq. 10b/12b, #Wpb vs #Aw, latency per
request, soft instead of hard case switches) and the counter mapping; ``mode="paper"``
evaluates the text as printed.

Calibrated predictions of *block-starved* kernels (resolution 14 in `rust/src/time/mod.rs`):
a kernel whose achieved occupancy stays far below what its block size allows, over many
waves, is limited by how fast blocks reach the SMs, not by the SMs. Its reference time
then holds a floor that no clock moves (a GTX 980 kernel of 262144 one-warp blocks keeps
its time within 2% from 500 to 1000 MHz core, while its occupancy falls as Little's law
says). Such a kernel is predicted as the soft maximum of that floor and the model at the
occupancy its block size allows; the floor is what the reference time leaves over.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from .. import _core
from ..errors import InputError
from ..limits import clock_array
from .device import TimeDevice
from .profile import KernelProfile

CASES = ("compute", "memory", "few-warps", "few-warps-long-compute", "shared-infrequent", "shared-intensive",
         "block-dispatch")
DISPATCH_CASE = CASES.index("block-dispatch")
MODES = ("default", "paper")


class TimeModel:
    """Kernel time (ms) at core/memory clock pairs, from profiles and a device.

    ``mode="default"`` is the resolved model, ``"paper"`` the text as printed."""

    def __init__(self, device: TimeDevice | str = "gtx980", mode: str = "default"):
        if mode not in MODES:
            raise InputError(f"unknown mode {mode!r}; expected one of {MODES}")
        self.device = TimeDevice.preset(device) if isinstance(device, str) else device
        self.mode = mode

    def _raw(self, rows: np.ndarray, core: np.ndarray, mem: np.ndarray):
        try:
            return _core.time_predict(rows, core, mem, self.device.params(), self.mode)
        except ValueError as e:
            raise InputError(str(e)) from None

    def predict(self, profiles: KernelProfile | Sequence[KernelProfile], core_mhz, mem_mhz, *,
                calibrate: bool = False, return_cases: bool = False):
        """Time [n_profiles, *clocks] in ms (a single profile drops the first axis; scalars
        give a float). ``calibrate`` scales each kernel so the model matches its measured
        reference time (block-starved kernels: see the module notes); ``return_cases`` also
        returns the regime label of each prediction."""
        single = isinstance(profiles, KernelProfile)
        profs = [profiles] if single else list(profiles)
        if not profs:
            raise InputError("no kernel profiles given")
        c, m = np.broadcast_arrays(clock_array(core_mhz, "core_mhz"), clock_array(mem_mhz, "mem_mhz"))
        c_flat, m_flat = np.ascontiguousarray(c.ravel()), np.ascontiguousarray(m.ravel())
        rows = np.array([p.inputs() for p in profs], dtype=np.float64)
        t, case = self._raw(rows, c_flat, m_flat)
        if calibrate:
            t = t * self.calibration(profs)[:, None]
            for i, p in enumerate(profs):
                if self.mode == "default" and p.block_starved(self.device):
                    self._dispatch_floor(p, c_flat, m_flat, t[i], case[i])
        t = t.reshape((len(profs),) + c.shape)
        if single:
            t = t[0]
            t = float(t) if t.ndim == 0 else t
        if not return_cases:
            return t
        # Labels only on request: a string per prediction costs more than the prediction.
        labels = np.asarray(CASES, dtype=object)[case].reshape((len(profs),) + c.shape)
        if single:
            labels = labels[0]  # a str at one pair: the object array holds Python strings
        return t, labels

    def _dispatch_floor(self, p: KernelProfile, core: np.ndarray, mem: np.ndarray, t: np.ndarray,
                        case: np.ndarray) -> None:
        """Overwrite a block-starved kernel's calibrated times with soft-max(floor, model at
        the occupancy its block size allows); the floor is what the reference time leaves
        over that model. Nothing changes if the model alone already exceeds the reference."""
        full = replace(p, active_warps=p.slot_warps)
        t_full, case_full = self._raw(np.array([full.inputs()], dtype=np.float64), core, mem)
        q = self.device.overlap_p
        rest = p.reference_time_ms ** q - self._at_reference(full) ** q
        if rest <= 0:
            return
        floor = rest ** (1 / q)
        t[:] = (floor ** q + t_full[0] ** q) ** (1 / q)
        case[:] = np.where(t_full[0] > floor, case_full[0], DISPATCH_CASE)

    def calibration(self, profiles: Sequence[KernelProfile]) -> np.ndarray:
        """Per kernel: measured reference time over the model's time at the reference."""
        missing = [p.name for p in profiles if p.reference_time_ms is None or p.reference_mhz is None]
        if missing:
            raise InputError(f"calibration needs each profile's reference_mhz and reference_time_ms; "
                             f"missing for {missing}")
        return np.array([p.reference_time_ms / self._at_reference(p) for p in profiles])

    def _at_reference(self, p: KernelProfile) -> float:
        """The model's time (ms) of one profile at its reference pair."""
        # The core takes float64 arrays only, and reference_mhz may hold ints: (700, 700).
        core, mem = (np.array([f], dtype=np.float64) for f in p.reference_mhz)
        t, _ = self._raw(np.array([p.inputs()], dtype=np.float64), core, mem)
        return float(t[0, 0])
