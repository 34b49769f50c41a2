"""Locked clocks outlive the process: a guard puts them back at exit and on SIGINT/SIGTERM.

Handlers are installed while any clocks are locked, chaining to the handlers they replaced,
which are put back afterwards. SIGKILL cannot be caught: after one, ``sudo nvidia-smi -rgc``,
``-rmc`` and ``-rac`` reset the clocks, and ``-pl W`` the power limit.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
import warnings
from typing import Any, Protocol

from gpudvfs.errors import GpudvfsWarning


class Resettable(Protocol):
    """Settings the guard undoes: GPU ``index``'s, by `reset`."""

    index: int

    def reset(self) -> None:
        """Undo every setting in force."""


class ClockGuard:
    """Resets every registered GPU's settings at exit and on SIGINT/SIGTERM (one per process)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self._settings: list[Resettable] = []
        self._previous: dict[int, Any] = {}
        self._lock = threading.RLock()
        self._atexit_registered = False
        self._thread_warned = False

    def add(self, settings: Resettable) -> None:
        """Guard a GPU's settings, about to be changed, until `discard`; the first one installs the handlers."""
        with self._lock:
            if settings not in self._settings:
                self._settings.append(settings)
            if not self._atexit_registered:
                atexit.register(self.reset_all)
                self._atexit_registered = True
            if not self._previous:
                self._install()

    def discard(self, settings: Resettable) -> None:
        """Stop guarding settings back to the driver's; the last one puts the handlers back."""
        with self._lock:
            if settings in self._settings:
                self._settings.remove(settings)
            if not self._settings:
                self._uninstall()

    def _install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            # Python only lets the main thread set signal handlers.
            if self._thread_warned:
                return
            self._thread_warned = True
            warnings.warn(
                "clocks locked from a thread other than the main one: SIGINT/SIGTERM cannot "
                "be hooked, so a signal would leave them locked (atexit still resets them)",
                GpudvfsWarning,
                stacklevel=5,
            )
            return
        for signum in self.SIGNALS:
            previous = signal.getsignal(signum)
            if previous is signal.SIG_IGN:
                continue  # the process does not end on it, so nothing to clean up
            # Recorded first: a signal right after the handler is set must find what to chain
            # to, not end the process as if there had been none.
            self._previous[signum] = previous
            signal.signal(signum, self._handle)

    def _uninstall(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # handlers stay; with nothing guarded they only chain to the previous ones
        for signum, previous in self._previous.items():
            # Put back only our own handler: someone may have replaced it since.
            if signal.getsignal(signum) == self._handle:
                signal.signal(signum, signal.SIG_DFL if previous is None else previous)
        self._previous.clear()

    def reset_all(self) -> None:
        """Undo every guarded GPU's settings; a failure is printed and the others still run."""
        with self._lock:
            guarded = list(self._settings)
        for settings in guarded:
            try:
                settings.reset()
            except Exception as exc:  # one failure must not keep the others locked
                print(f"gpudvfs: could not reset clocks of GPU {settings.index}: {exc}",
                      file=sys.stderr)

    def _handle(self, signum: int, frame: Any) -> None:
        previous = self._previous.get(signum, signal.SIG_DFL)
        self.reset_all()
        if callable(previous):
            previous(signum, frame)
            return
        # SIG_DFL (or a handler set outside Python): end the way the signal would have.
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


#: The process's one guard.
GUARD = ClockGuard()
