"""CPU package and DRAM energy from RAPL, through Linux's powercap sysfs.

A zone ``intel-rapl:N`` named ``package-K`` counts CPU package K's energy in ``energy_uj``
(µJ), its subzone named ``dram`` that package's memory; AMD CPUs expose their packages through
the same driver on recent kernels. The counter wraps to 0 past ``max_energy_range_uj``: a
`RaplZone` read at least once per range counts each wrap, and `Rapl` reads its zones every
`WRAP_CHECK_S` in a thread so that a long window misses none (a range is 262 kJ on many
Intel CPUs: ten minutes at 400 W). Since the 2020 fix for CVE-2020-8694 (PLATYPUS),
``energy_uj`` is readable by root alone on most kernels; why a zone is not read is kept in
`Rapl.unavailable`, never raised.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

from gpudvfs.errors import GpudvfsError

#: Where Linux exposes powercap zones.
POWERCAP = Path("/sys/class/powercap")
#: Seconds between the wrap checks of `Rapl.start`.
WRAP_CHECK_S = 1.0

_ZONE = re.compile(r"intel-rapl:(\d+)(?::(\d+))?")


def _parse(path: Path, text: bytes) -> int:
    try:
        return int(text)
    except ValueError:
        raise GpudvfsError(f"{path}: expected an integer count, got {text.decode(errors='replace').strip()[:40]!r}") \
            from None


def _read_int(path: Path) -> int:
    """An integer file of sysfs; OSError where unreadable, GpudvfsError where not an integer."""
    return _parse(path, path.read_bytes())


def _why(path: Path, e: BaseException) -> str:
    if isinstance(e, PermissionError):
        return (f"{path}: permission denied (root-only on most kernels since the fix for CVE-2020-8694): "
                "run as root or grant read access to the energy_uj files")
    return f"{path}: {e.strerror if isinstance(e, OSError) and e.strerror else e}"


class RaplZone:
    """One RAPL counter (a ``"cpu"`` package or its ``"dram"``), read as joules since opened, its wraps included.

    ``folder`` holds ``energy_uj`` and ``max_energy_range_uj``. `OSError` where a file cannot be read
    (the caller says why); `GpudvfsError` where one holds no integer, or the range is not positive.
    """

    def __init__(self, folder: Path, kind: str, package: int) -> None:
        self.folder, self.kind, self.package = folder, kind, package
        self.range_uj = _read_int(folder / "max_energy_range_uj")
        if self.range_uj <= 0:
            raise GpudvfsError(f"{folder / 'max_energy_range_uj'}: expected a range > 0 µJ, got {self.range_uj}")
        self._lock = threading.Lock()
        # Kept open and read at offset 0, which sysfs answers anew: 20 times faster than opening it each time.
        self._path = folder / "energy_uj"
        self._fd = os.open(self._path, os.O_RDONLY)
        try:
            self._last = self._raw()
        except BaseException:
            self.close()
            raise
        self._total_uj = 0

    def _raw(self) -> int:
        value = _parse(self._path, os.pread(self._fd, 64, 0))
        if not 0 <= value <= self.range_uj:
            raise GpudvfsError(f"{self._path}: {value} µJ lies outside 0..{self.range_uj}")
        return value

    def close(self) -> None:
        """Close the counter's file."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def joules(self) -> float:
        """Energy since the zone was opened, J: exact where read at least once per ``range_uj`` (wraps counted)."""
        with self._lock:
            raw = self._raw()
            step = raw - self._last
            self._total_uj += step if step >= 0 else step + self.range_uj
            self._last = raw
            return self._total_uj / 1e6


def open_zones(root: Path) -> tuple[list[RaplZone], list[str]]:
    """The package and DRAM zones under ``root`` (`POWERCAP`; a test's fake tree), and a line per zone not read."""
    if not root.is_dir():
        return [], [f"{root} not found: no powercap RAPL driver here (Linux's intel_rapl_common module)"]
    found: dict[str, tuple[str, int, Path]] = {}
    names: dict[str, str] = {}
    why: list[str] = []
    for folder in sorted(root.iterdir()):
        m = _ZONE.fullmatch(folder.name)
        if m is None:
            continue
        try:
            names[folder.name] = (folder / "name").read_bytes().decode(errors="replace").strip()
        except OSError as e:
            why.append(_why(folder / "name", e))
    for zone, name in names.items():
        m = _ZONE.fullmatch(zone)
        assert m is not None
        parent = names.get(f"intel-rapl:{m.group(1)}", "")
        if m.group(2) is None and re.fullmatch(r"package-\d+", name):
            found[zone] = ("cpu", int(name.split("-")[1]), root / zone)
        elif m.group(2) is not None and name == "dram" and re.fullmatch(r"package-\d+", parent):
            found[zone] = ("dram", int(parent.split("-")[1]), root / zone)
    if not found and not why:
        why.append(f"{root}: no RAPL package zone (intel-rapl:N named package-K)")
    zones = []
    for kind, package, folder in found.values():
        try:
            zones.append(RaplZone(folder, kind, package))
        except (OSError, GpudvfsError) as e:
            why.append(_why(folder / "energy_uj", e) if isinstance(e, OSError) else str(e))
    return zones, why


class Rapl:
    """The CPU packages' and their DRAM's energy counters under ``root`` (`POWERCAP`), read where readable."""

    def __init__(self, root: str | Path = POWERCAP) -> None:
        self.zones, why = open_zones(Path(root))
        #: Why a zone (or every zone) is not read, one line per reason; None where all are read.
        self.unavailable: str | None = "; ".join(why) or None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: What ended the wrap-check thread, if anything did.
        self.error: BaseException | None = None

    def read(self) -> tuple[dict[int, float], dict[int, float]]:
        """(CPU, DRAM) energy since opened, J by package."""
        cpu: dict[int, float] = {}
        dram: dict[int, float] = {}
        for z in self.zones:
            (cpu if z.kind == "cpu" else dram)[z.package] = z.joules()
        return cpu, dram

    def _run(self, interval: float) -> None:
        try:
            while not self._stop.wait(interval):
                self.read()
        except BaseException as e:
            self.error = e

    def start(self, interval: float = WRAP_CHECK_S) -> None:
        """Read the zones every ``interval`` s in a daemon thread, so no wrap goes unseen."""
        if self.zones and self._thread is None:
            self._thread = threading.Thread(target=self._run, args=(interval,), name="gpudvfs-rapl", daemon=True)
            self._thread.start()

    def close(self) -> None:
        """Stop the wrap checks and close the counters' files."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        for z in self.zones:
            z.close()
