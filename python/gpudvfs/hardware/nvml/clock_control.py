"""Setting a GPU's clocks and power limit through NVML, and undoing exactly what was set.

Clock control, by capability:

* locked clocks (``nvmlDeviceSetGpuLockedClocks``: Volta and newer;
  ``nvmlDeviceSetMemoryLockedClocks``: Ampere and newer), both need root;
* application clocks (``nvmlDeviceSetApplicationsClocks``) where locked clocks are not
  supported (before Volta, and the memory clock before Ampere); root, unless an administrator
  ran ``nvidia-smi -acp UNRESTRICTED``;
* the board's power limit (``nvmlDeviceSetPowerManagementLimit``), root, within the range the
  board reports; a reset puts back the limit it found.

Every setting is registered with the process's `GUARD` before it is made, so a signal or the
interpreter's exit undoes it.
"""

from __future__ import annotations

import threading
from typing import Any

from gpudvfs.hardware.device import ClockPermissionError
from gpudvfs.hardware.nvml.bindings import ClockControlError, unsupported
from gpudvfs.hardware.nvml.clock_guard import GUARD

# What undoes each clock setting.
_RESETS = {"gpu_locked": "nvmlDeviceResetGpuLockedClocks",
           "mem_locked": "nvmlDeviceResetMemoryLockedClocks",
           "app_clocks": "nvmlDeviceResetApplicationsClocks"}


class ClockControl:
    """The clock and power-limit settings this process made on one GPU (``index`` and ``name`` for messages)."""

    def __init__(self, nv: Any, handle: Any, index: int, name: str) -> None:
        self._nv, self._handle = nv, handle
        self.index, self.name = index, name
        self._state = threading.RLock()
        self._active: list[str] = []  # NVML settings in force, in the order they were made
        #: The (core, memory) MHz locked now; None while the driver chooses.
        self.locked: tuple[float, float] | None = None
        self._limit_before_mw: int | None = None  # the power limit before `set_power_limit`
        self._gpu_lock_ok: bool | None = None  # capability, learnt on first use
        self._mem_lock_ok: bool | None = None

    @property
    def active(self) -> bool:
        """Whether any setting of this object is in force."""
        return bool(self._active)

    def lock(self, core: int, mem: int) -> None:
        """Run the GPU at ``core``/``mem`` MHz (a supported pair), with locked clocks where it has them.

        Any earlier setting is undone first, so settings never mix; a lock that fails part-way is
        undone too. `ClockPermissionError` where setting clocks needs root (the message says how to get
        it); `ClockControlError` where the GPU supports neither locked nor application clocks.
        """
        with self._state:
            if self._active:
                self.reset()  # start from driver control, so settings never mix
            GUARD.add(self)  # before the first NVML call, so a signal mid-way still resets
            try:
                self._apply(core, mem)
            except BaseException as exc:
                try:
                    self.reset()
                except ClockControlError as reset_exc:
                    raise reset_exc from exc
                raise
            self.locked = (float(core), float(mem))

    def lock_core(self, core: int) -> None:
        """Lock the core clock alone at ``core`` MHz, the memory clock left to the driver (``locked`` stays None).

        Any earlier setting is undone first. `ClockPermissionError` without root; `ClockControlError`
        where the GPU has no locked clocks (before Volta: its application clocks carry both clocks).
        """
        nv, h = self._nv, self._handle
        with self._state:
            if self._active:
                self.reset()
            GUARD.add(self)
            try:
                nv.nvmlDeviceSetGpuLockedClocks(h, core, core)
            except BaseException as exc:
                GUARD.discard(self)
                if isinstance(exc, nv.NVMLError_NoPermission):
                    raise self._permission_error("locked", core, exc) from exc
                if isinstance(exc, (*unsupported(nv), AttributeError)):
                    raise ClockControlError(f"{self.name} cannot lock its core clock alone ({exc}): locked clocks "
                                            "need Volta or newer; use the clocks knob") from exc
                raise
            self._gpu_lock_ok = True
            self._active.append("gpu_locked")

    def _apply(self, core: int, mem: int) -> None:
        nv, h = self._nv, self._handle
        cannot = unsupported(nv)
        # AttributeError: bindings too old to have the call.
        cannot_lock_mem: tuple[type[BaseException], ...] = (*cannot, AttributeError)
        gpu_done = mem_done = False
        if self._gpu_lock_ok is not False:
            try:
                nv.nvmlDeviceSetGpuLockedClocks(h, core, core)
            except cannot:
                self._gpu_lock_ok = False
            except nv.NVMLError_NoPermission as exc:
                raise self._permission_error("locked", core, exc) from exc
            else:
                self._gpu_lock_ok = gpu_done = True
                self._active.append("gpu_locked")
        if gpu_done and self._mem_lock_ok is not False:
            try:
                nv.nvmlDeviceSetMemoryLockedClocks(h, mem, mem)
            except cannot_lock_mem:
                self._mem_lock_ok = False
            except nv.NVMLError_NoPermission as exc:
                raise self._permission_error("locked", core, exc) from exc
            else:
                self._mem_lock_ok = mem_done = True
                self._active.append("mem_locked")
        if gpu_done and mem_done:
            return
        # Application clocks carry both clocks: all of them before Volta, the memory clock
        # before Ampere (where the core clock is already locked and takes precedence).
        try:
            nv.nvmlDeviceSetApplicationsClocks(h, mem, core)
        except cannot as exc:
            what = "the memory clock" if gpu_done else "clocks"
            raise ClockControlError(
                f"{self.name} supports neither locked nor application clocks for {what} "
                f"({exc}); cannot run at {core} MHz core / {mem} MHz memory"
            ) from exc
        except nv.NVMLError_NoPermission as exc:
            raise self._permission_error("application", core, exc) from exc
        self._active.append("app_clocks")

    def _permission_error(self, kind: str, core: int, exc: BaseException) -> ClockPermissionError:
        where = f"GPU {self.index} ({self.name})"
        if kind == "locked":
            msg = (f"setting locked clocks on {where} needs root (NVML returned: {exc}). "
                   "Run as root, e.g. `sudo python ...`: the privilege "
                   f"`sudo nvidia-smi -i {self.index} -lgc {core},{core}` needs. NVML has no "
                   "setting that opens locked clocks to other users.")
        else:
            msg = (f"setting application clocks on {where} needs root (NVML returned: {exc}). "
                   "Run as root, or have an administrator allow all users with "
                   f"`sudo nvidia-smi -i {self.index} -acp UNRESTRICTED` (on drivers that still "
                   "honour this deprecated switch). That permission lasts "
                   "only while the driver keeps the GPU initialised; on a headless Linux machine "
                   "it is lost when the last GPU process exits unless persistence mode is on: "
                   f"`sudo nvidia-smi -i {self.index} -pm 1` first.")
        return ClockPermissionError(msg)

    def set_power_limit(self, watts: float) -> None:
        """Set the board's power limit, W; the first one records the limit `reset` puts back.

        `ClockPermissionError` where setting it needs root; `ClockControlError` where the GPU takes none.
        """
        nv, h = self._nv, self._handle
        with self._state:
            if "power_limit" not in self._active:
                self._limit_before_mw = int(nv.nvmlDeviceGetPowerManagementLimit(h))
            GUARD.add(self)  # before the NVML call, so a signal mid-way still puts the limit back
            try:
                nv.nvmlDeviceSetPowerManagementLimit(h, round(watts * 1000))
            except BaseException as exc:
                if not self._active:
                    GUARD.discard(self)
                if isinstance(exc, nv.NVMLError_NoPermission):
                    raise ClockPermissionError(
                        f"setting the power limit of GPU {self.index} ({self.name}) needs root (NVML returned: "
                        f"{exc}); the privilege `sudo nvidia-smi -i {self.index} -pl {watts:g}` needs") from exc
                if isinstance(exc, unsupported(nv)):
                    raise ClockControlError(f"{self.name} does not take a power limit ({exc})") from exc
                raise
            if "power_limit" not in self._active:
                self._active.append("power_limit")

    def reset(self) -> None:
        """Undo every clock and power-limit setting this object made.

        `ClockControlError` where NVML refused; the message gives the ``nvidia-smi`` commands that do it.
        """
        nv, h = self._nv, self._handle
        with self._state:
            failed: list[str] = []
            for what in reversed(list(self._active)):
                # The guard's signal handler may reset (re-entrantly, in this thread) while
                # this loop runs: what it undid is gone from the list already.
                if what not in self._active:
                    continue
                try:
                    if what == "power_limit":
                        nv.nvmlDeviceSetPowerManagementLimit(h, self._limit_before_mw)
                    else:
                        getattr(nv, _RESETS[what])(h)
                except nv.NVMLError as exc:
                    failed.append(f"{what}: {exc}")
                else:
                    if what in self._active:
                        self._active.remove(what)
            if failed:
                # Still registered with the guard, so exit handling tries again.
                raise ClockControlError(f"could not reset clocks of GPU {self.index} "
                                        f"({'; '.join(failed)}); reset them with `sudo "
                                        f"nvidia-smi -i {self.index} -rgc` (locked core clock), "
                                        "`-rmc` (locked memory clock), `-rac` (application "
                                        "clocks) or `-pl W` (the power limit)")
            self.locked = None
            GUARD.discard(self)
