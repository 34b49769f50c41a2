"""The analytical kernel-time model of Wang & Chu under core and memory frequency scaling.

Counters profiled once at a reference configuration (:class:`KernelProfile`) and device
parameters from microbenchmarks (:class:`TimeDevice`) give the time of a kernel at any
(fc, fm) (:class:`TimeModel`, batched in the Rust core, `rust/src/time/`). The module
documentation of `rust/src/time/mod.rs` lists every resolution of the paper's ambiguities
(Table II's columns, Eq. 5a's double fc/fm, Eq. 10b/12b, #Wpb vs #Aw, latency per
request, soft instead of hard case switches) and the counter mapping; ``mode="paper"``
evaluates the text as printed.

Calibrated predictions of *block-starved* kernels (resolution 14 in `rust/src/time/mod.rs`):
a kernel whose achieved occupancy stays far below its theoretical occupancy (as Nsight
Compute reports it), over many waves, is limited by how fast blocks reach the SMs, not by
the SMs. Its reference time then holds a floor that no clock moves (a GTX 980 kernel of
262144 one-warp blocks keeps its time within 2% from 500 to 1000 MHz core). Such a kernel is
predicted as the soft maximum of that floor and the model at its theoretical occupancy; the
floor is what the reference time leaves over.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from gpudvfs import _core
from gpudvfs.errors import InputError
from gpudvfs.limits import clock_array
from gpudvfs.time.device import TimeDevice
from gpudvfs.time.profile import KernelProfile

CASES = ("compute", "memory", "few-warps", "few-warps-long-compute", "shared-infrequent", "shared-intensive",
         "block-dispatch")
DISPATCH_CASE = CASES.index("block-dispatch")
MODES = ("default", "paper")
CALIBRATIONS = ("scale", "dram-check")
#: ``calibration="dram-check"``: below this share of its reference time in DRAM transfers, a
#: kernel is not memory-bound, whatever the model's terms say.
DRAM_BOUND = 0.8


class TimeModel:
    """Kernel time (ms) at core/memory clock pairs, from profiles and a device.

    ``device`` is a `TimeDevice` or a name :meth:`TimeDevice.preset` knows; ``mode`` ``default``
    (the resolved model) or ``paper`` (the text as printed). ``calibration`` says how a calibrated
    prediction meets the measured reference time: ``scale`` multiplies the model by the ratio;
    ``dram-check`` first checks the memory bound against the device's bandwidth: a kernel whose
    DRAM transfers fill less than :data:`DRAM_BOUND` of its reference time, and which the model
    finds faster than measured, gets the missing time as latency in its warps' chains (core
    cycles: barriers, dependent instructions the counters do not show), not as more memory time.

    Examples
    --------
    A kernel profiled at the GTX 980's reference clocks, predicted at half its core clock,
    from the model alone and calibrated on its measured 0.5 ms:

    >>> from gpudvfs import KernelProfile, TimeModel
    >>> kernel = KernelProfile("saxpy", warps_total=32768, active_warps=48, warps_per_block=8,
    ...                        gld_trans=8, trans_per_req=4, l2_hit_rate=0.1, comp_inst=20,
    ...                        shared_trans=0, reference_mhz=(1076, 3505), reference_time_ms=0.5)
    >>> model = TimeModel("gtx980")
    >>> model.predict(kernel, [540, 1076], 3505).round(3)
    array([0.058, 0.039])
    >>> ms, cases = model.predict(kernel, [540, 1076], 3505, calibrate=True, return_cases=True)
    >>> ms.round(3), list(cases)
    (array([0.75, 0.5 ]), ['few-warps', 'memory'])
    """

    def __init__(self, device: TimeDevice | str = "gtx980", mode: str = "default",
                 calibration: str = "scale") -> None:
        if mode not in MODES:
            raise InputError(f"unknown mode {mode!r}; expected one of {MODES}")
        if calibration not in CALIBRATIONS:
            raise InputError(f"unknown calibration {calibration!r}; expected one of {CALIBRATIONS}")
        if not isinstance(device, (str, TimeDevice)):
            raise InputError(f"device must be a preset name or a TimeDevice, got {type(device).__name__}")
        self.device = TimeDevice.preset(device) if isinstance(device, str) else device
        self.mode = mode
        self.calibration_mode = calibration

    def _raw(self, rows: np.ndarray, core: np.ndarray, mem: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        try:
            return _core.time_predict(rows, core, mem, self.device.params(), self.mode)
        except ValueError as e:
            raise InputError(str(e)) from None

    def predict(self, profiles: KernelProfile | Sequence[KernelProfile], core_mhz: ArrayLike, mem_mhz: ArrayLike, *,
                calibrate: bool = False, return_cases: bool = False) -> Any:
        """Time in ms of each kernel at each clock pair (MHz, broadcast together).

        Time is [n_profiles, *clocks]; a single profile drops the first axis, and a single profile
        at scalar clocks gives a float. ``calibrate`` makes each kernel meet its measured reference
        time (as ``calibration`` says; block-starved kernels: see the module notes);
        ``return_cases`` also returns the regime label of each prediction (one of :data:`CASES`),
        of the times' shape.

        Raises `InputError` if no profile is given, a clock is invalid, calibration lacks a
        profile's reference, or the model's time is not finite.
        """
        single = isinstance(profiles, KernelProfile)
        profs: list[KernelProfile] = [profiles] if isinstance(profiles, KernelProfile) else list(profiles)
        if not profs:
            raise InputError("no kernel profiles given")
        if not all(isinstance(p, KernelProfile) for p in profs):
            raise InputError("predict takes KernelProfile objects (KernelProfile.from_counters)")
        c, m = np.broadcast_arrays(clock_array(core_mhz, "core_mhz"), clock_array(mem_mhz, "mem_mhz"))
        c_flat, m_flat = np.ascontiguousarray(c.ravel()), np.ascontiguousarray(m.ravel())
        if calibrate and self.calibration_mode == "dram-check" and self.mode == "default":
            profs = self._latency_for_unexplained_time(profs)
        rows = np.array([p.inputs() for p in profs], dtype=np.float64)
        t, case = self._raw(rows, c_flat, m_flat)
        if calibrate:
            t = t * self.calibration(profs)[:, None]
            if self.mode == "default":
                refs, ref_ms = self._references(profs)
                for i, p in enumerate(profs):
                    # Only a kernel whose slot count is known can be block-starved.
                    if p.slot_warps is not None and p.block_starved(self.device):
                        self._dispatch_floor(p, p.slot_warps, refs[i], float(ref_ms[i]), c_flat, m_flat, t[i],
                                             case[i])
        if not np.isfinite(t).all():
            i, j = np.argwhere(~np.isfinite(t))[0]
            raise InputError(f"kernel {profs[i].name!r}: the model's time at {c_flat[j]:g}/{m_flat[j]:g} MHz is "
                             f"{t[i, j]}: its counters, the clocks or the device's parameters are out of range")
        t = t.reshape((len(profs),) + c.shape)
        times: float | np.ndarray = t
        if single:
            times = float(t[0]) if t[0].ndim == 0 else t[0]
        if not return_cases:
            return times
        # Labels only on request: a string per prediction costs more than the prediction.
        labels = np.asarray(CASES, dtype=object)[case].reshape((len(profs),) + c.shape)
        if single:
            labels = labels[0]  # a str at one pair: the object array holds Python strings
        return times, labels

    def _dispatch_floor(self, p: KernelProfile, slot_warps: float, ref: tuple[float, float], ref_ms: float,
                        core: np.ndarray, mem: np.ndarray, t: np.ndarray, case: np.ndarray) -> None:
        """Overwrite a block-starved kernel's calibrated times with soft-max(floor, model at its theoretical occupancy).

        The floor is what the reference time leaves over that model. Nothing changes if the
        model alone already exceeds the reference.
        """
        full = replace(p, active_warps=slot_warps)
        t_full, case_full = self._raw(np.array([full.inputs()], dtype=np.float64), core, mem)
        q = self.device.overlap_p
        rest = ref_ms ** q - self._at_references([full], [ref])[0] ** q
        if rest <= 0:
            return
        floor = rest ** (1 / q)
        t[:] = (floor ** q + t_full[0] ** q) ** (1 / q)
        case[:] = np.where(t_full[0] > floor, case_full[0], DISPATCH_CASE)

    def _latency_for_unexplained_time(self, profiles: list[KernelProfile]) -> list[KernelProfile]:
        """Profiles of kernels the model finds faster than measured, with the chain latency that closes the gap.

        Only kernels that are not memory-bound by the DRAM check; the latency is found by
        bisection (the model's time grows with it).
        """
        refs, ref_ms = self._references(profiles)
        at_ref = self._at_references(profiles, refs)
        dram = np.array([self.device.dram_busy_ms(p.dram_transactions, r[1]) for p, r in zip(profiles, refs)])
        gap = np.flatnonzero((dram < DRAM_BOUND * ref_ms) & (at_ref < ref_ms))
        if not len(gap):
            return profiles
        gap_refs = [refs[i] for i in gap]

        def at_refs(chains: np.ndarray) -> np.ndarray:
            return self._at_references([replace(profiles[i], extra_chain=x) for i, x in zip(gap, chains)], gap_refs)

        lo, hi = np.zeros(len(gap)), np.array([profiles[i].comp_inst + 1.0 for i in gap])
        while True:  # grow the bracket until each kernel's model reaches its reference time
            short = at_refs(hi) < ref_ms[gap]
            if not short.any():
                break
            hi = np.where(short, 4 * hi, hi)
        for _ in range(60):
            mid = (lo + hi) / 2
            low = at_refs(mid) < ref_ms[gap]
            lo, hi = np.where(low, mid, lo), np.where(low, hi, mid)
        out = list(profiles)
        for i, x in zip(gap, hi):
            out[i] = replace(profiles[i], extra_chain=float(x))
        return out

    def _at_references(self, profiles: Sequence[KernelProfile], refs: list[tuple[float, float]]) -> np.ndarray:
        """The model's time (ms) of each profile at its own reference pair ``refs``: one batch per pair."""
        out = np.empty(len(profiles))
        for ref in dict.fromkeys(refs):
            idx = [i for i, r in enumerate(refs) if r == ref]
            rows = np.array([profiles[i].inputs() for i in idx], dtype=np.float64)
            t, _ = self._raw(rows, np.array([ref[0]]), np.array([ref[1]]))
            out[idx] = t[:, 0]
        return out

    @staticmethod
    def _references(profiles: Sequence[KernelProfile]) -> tuple[list[tuple[float, float]], np.ndarray]:
        """Each profile's reference pair and measured time there, which calibration needs."""
        refs, times, missing = [], [], []
        for p in profiles:
            if p.reference_mhz is None or p.reference_time_ms is None:
                missing.append(p.name)
            else:
                refs.append(p.reference_mhz)
                times.append(p.reference_time_ms)
        if missing:
            raise InputError(f"calibration needs each profile's reference_mhz and reference_time_ms; "
                             f"missing for {missing}")
        return refs, np.array(times)

    def calibration(self, profiles: Sequence[KernelProfile]) -> np.ndarray:
        """Per kernel: measured reference time over the model's time there (`InputError` if it has none)."""
        refs, ref_ms = self._references(profiles)
        at_ref = self._at_references(profiles, refs)
        bad = np.flatnonzero(~(np.isfinite(at_ref) & (at_ref > 0)))
        if len(bad):
            i = int(bad[0])
            raise InputError(f"kernel {profiles[i].name!r}: the model's time at its reference {refs[i][0]:g}/"
                             f"{refs[i][1]:g} MHz is {at_ref[i]}, which no measured time can calibrate")
        return ref_ms / at_ref
