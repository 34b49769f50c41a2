"""Privilege separation for clock changes: a clock service per node, and its clients.

One small service per node owns the GPU's clock calls (setting clocks needs root), and
governors in users' jobs talk to it unprivileged over a Unix socket.

Protocol: one JSON object per line each way. Requests: ``{"op": "pairs"}`` (the supported
(core, memory) pairs), ``{"op": "clocks"}`` (the pair the service locked, its memory clock null
where the core clock alone is, or null), ``{"op": "set", "core_mhz": C, "mem_mhz": M}``,
``{"op": "set_core", "core_mhz": C}`` (the core clock alone, as ``nvidia-smi -lgc``),
``{"op": "power_limits"}`` (the board's power limits, where the device has that knob),
``{"op": "power_limit", "watts": W}`` and ``{"op": "reset"}`` (clocks and power limit back as
found). Replies: ``{"ok": true, ...}`` or
``{"ok": false, "error": "..."}``. One client at a time owns the clocks and the power limit
(the first to set either); when the owner's connection closes, for whatever reason (exit,
crash, SIGKILL), the service resets them, so a dead governor never leaves a GPU pinned.
The socket file's mode decides who may connect (``mode``, default 0o660: the owner and
its group).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import socketserver
import threading
import warnings
from collections.abc import Callable
from pathlib import Path

from gpudvfs.errors import GpudvfsWarning, InputError
from gpudvfs.hardware.device import Device
from gpudvfs.limits import is_finite_number

#: Longest request line; replies (the list of pairs) may be longer, up to MAX_REPLY.
MAX_LINE = 4096
MAX_REPLY = 1 << 20


class ClockService:
    """A GPU's clocks served on a Unix socket, from a thread (`start`, `stop`).

    ``device``: the GPU, its clocks and its power limit; ``mode``: the socket's permissions (who may
    connect).
    """

    def __init__(self, device: Device, path: str | Path, mode: int = 0o660) -> None:
        self.device, self.path, self.mode = device, Path(path), mode
        self._lock = threading.Lock()
        self._owner: object | None = None
        self._set: tuple[float, float | None] | None = None  # what this service locked; None: the driver's
        self._pairs = {(float(c), float(m)) for m in device.memory_clocks() for c in device.core_clocks(m)}
        self._cores = {c for c, _ in self._pairs}
        self._server: socketserver.ThreadingUnixStreamServer | None = None

    # requests -----------------------------------------------------------------------
    def handle(self, client: object, request: dict) -> dict:
        """Answer one request of ``client`` (module notes).

        ``client``: the connection (the owner of the clocks is one). Returns ``{"ok": true, ...}``
        or ``{"ok": false, "error": ...}``; `InputError` for the power limit of a device without
        that knob.
        """
        op = request.get("op")
        with self._lock:
            if op == "pairs":
                return {"ok": True, "pairs": sorted(self._pairs, reverse=True)}
            if op == "clocks":
                return {"ok": True, "clocks": None if self._set is None else list(self._set)}
            if op == "power_limits":
                return {"ok": True, "power_limits": self.device.power_limits()}
            if op not in ("set", "set_core", "power_limit", "reset"):
                return {"ok": False, "error": f"unknown op {op!r}; expected pairs, clocks, set, set_core, "
                                              "power_limits, power_limit or reset"}
            if self._owner is not None and self._owner is not client:
                return {"ok": False, "error": "another client owns this GPU's clocks"}
            if op == "reset":
                self._reset()
                return {"ok": True}
            if op == "power_limit":
                watts = request.get("watts")
                if watts is None or not is_finite_number(watts):
                    return {"ok": False, "error": "power_limit needs a number watts"}
                self.device.set_power_limit(float(watts))
                self._owner = client
                return {"ok": True}
            if op == "set_core":
                core = request.get("core_mhz")
                if core is None or not is_finite_number(core):
                    return {"ok": False, "error": "set_core needs a number core_mhz"}
                if float(core) not in self._cores:
                    return {"ok": False, "error": f"{float(core):g} MHz is not a supported core clock"}
                self.device.lock_core_clock(float(core))
                self._owner, self._set = client, (float(core), None)
                return {"ok": True}
            try:
                pair = (float(request["core_mhz"]), float(request["mem_mhz"]))
            except (KeyError, TypeError, ValueError):
                return {"ok": False, "error": "set needs numbers core_mhz and mem_mhz"}
            if pair not in self._pairs:
                return {"ok": False, "error": f"{pair[0]:g}/{pair[1]:g} MHz is not a supported pair"}
            self.device.lock_clocks(*pair)
            self._owner, self._set = client, pair
            return {"ok": True}

    def reply(self, client: object, line: bytes) -> dict:
        """The reply to one request line; nothing a client sends stops the service.

        An error's where the line is not a JSON object or the device fails.
        """
        try:
            request = json.loads(line) if len(line) <= MAX_LINE else None
        except (json.JSONDecodeError, UnicodeDecodeError):
            request = None
        if not isinstance(request, dict):
            return {"ok": False, "error": f"expected one JSON object per line of at most {MAX_LINE} bytes"}
        try:
            return self.handle(client, request)
        except Exception as e:  # noqa: BLE001 -- a device error (permission, NVML) goes back to the client
            return {"ok": False, "error": str(e)}

    def release(self, client: object) -> None:
        """Give the clocks back if ``client``, whose connection closed, owned them."""
        with self._lock:
            if self._owner is client:
                self._reset()

    def _reset(self) -> None:
        self.device.reset_clocks()  # an NvmlDevice puts back the power limit it set, too
        self._owner = self._set = None

    # serving ------------------------------------------------------------------------
    def start(self) -> ClockService:
        """Serve from a thread of its own; a stale socket of a service that died is replaced.

        `InputError` where ``path`` exists and is not a socket.
        """
        service = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                try:
                    while line := self.rfile.readline(MAX_LINE + 1):
                        self.wfile.write((json.dumps(service.reply(self, line)) + "\n").encode())
                        if len(line) > MAX_LINE:
                            break  # the rest of an overlong line cannot be told from a request
                except OSError:
                    pass
                finally:
                    service.release(self)

        if self.path.exists():
            if not self.path.is_socket():
                raise InputError(f"{self.path} exists and is not a socket")
            self.path.unlink()  # a stale socket of a service that died
        # The device is driven from the request threads, where NvmlDevice cannot hook SIGINT
        # and SIGTERM and says so; the service resets the clocks itself on those (`stop`).
        warnings.filterwarnings("ignore", message="clocks locked from a thread other than the main one",
                                category=GpudvfsWarning)
        server = socketserver.ThreadingUnixStreamServer(str(self.path), Handler)
        server.daemon_threads = True
        os.chmod(self.path, self.mode)
        self._server = server
        threading.Thread(target=server.serve_forever, name="gpudvfs-clockd", daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop serving and give the clocks back to the driver."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        self.path.unlink(missing_ok=True)
        with self._lock:
            self._reset()


def serve_clocks(device: Device, path: str | Path, mode: int = 0o660,
                 started: Callable[[ClockService], None] | None = None) -> None:
    """Serve a GPU's clocks on a Unix socket until SIGTERM or SIGINT (`gpudvfs govern clockd`).

    The service then stops and gives the clocks back to the driver.

    ``started`` is called with the service once it serves; SIGINT raises
    `KeyboardInterrupt` once the clocks are reset.
    """
    stop = threading.Event()
    service = ClockService(device, path, mode).start()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        if started is not None:
            started(service)
        stop.wait()
    finally:
        signal.signal(signal.SIGTERM, previous)
        service.stop()


class ClockClient:
    """An unprivileged process's handle on the clock service.

    It offers `pairs`, `clocks`, `set`, `set_core`, `power_limits`, `set_power_limit` and `reset`.

    ``timeout_s``: seconds to wait for a reply. `InputError` where the service cannot be reached;
    from each call, where the service refuses the request or closes the connection.
    """

    def __init__(self, path: str | Path, timeout_s: float = 5.0) -> None:
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout_s)
        try:
            self._sock.connect(str(path))
        except OSError as e:
            self._sock.close()
            raise InputError(f"cannot reach the clock service at {path}: {e.strerror or e}") from None
        self._file = self._sock.makefile("rwb")

    def _call(self, **request: object) -> dict:
        self._file.write((json.dumps(request) + "\n").encode())
        self._file.flush()
        line = self._file.readline(MAX_REPLY)
        if not line:
            raise InputError("the clock service closed the connection")
        reply = json.loads(line)
        if not reply.get("ok"):
            raise InputError(f"clock service: {reply.get('error')}")
        return reply

    def pairs(self) -> list[tuple[float, float]]:
        """The GPU's supported (core, memory) MHz pairs, highest first."""
        return [(float(c), float(m)) for c, m in self._call(op="pairs")["pairs"]]

    def clocks(self) -> tuple[float, float | None] | None:
        """The (core, memory) MHz the service locked (memory None: the core clock alone); None: the driver's."""
        c = self._call(op="clocks")["clocks"]
        return None if c is None else (float(c[0]), None if c[1] is None else float(c[1]))

    def set(self, core_mhz: float, mem_mhz: float) -> None:
        """Lock the clocks at a supported pair (this client then owns them)."""
        self._call(op="set", core_mhz=core_mhz, mem_mhz=mem_mhz)

    def set_core(self, core_mhz: float) -> None:
        """Lock the core clock alone, the memory clock left to the driver (this client then owns it)."""
        self._call(op="set_core", core_mhz=core_mhz)

    def power_limits(self) -> dict:
        """The board's power limits in W: ``enforced``, ``default``, ``min`` and ``max``."""
        return self._call(op="power_limits")["power_limits"]

    def set_power_limit(self, watts: float) -> None:
        """Set the board's power limit (this client then owns the clocks and the limit)."""
        self._call(op="power_limit", watts=watts)

    def reset(self) -> None:
        """Give the clocks and the power limit back as the service found them."""
        self._call(op="reset")

    def close(self) -> None:
        """Close the connection (the service resets what this client set)."""
        self._file.close()
        self._sock.close()

    def __enter__(self) -> ClockClient:
        """Use the client in a ``with`` block, closed at its end."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the connection."""
        self.close()
