"""Numbers and units as the NVIDIA tools print them, converted to one base unit per dimension.

| printed unit (examples)                         | factor          | base unit       |
|-------------------------------------------------|-----------------|-----------------|
| `ns`, `nsecond`, `us`, `usecond`, `ms`, `msecond`, `s`, `second` | 1, 1e3, 1e6, 1e9 | `ns`  |
| `byte`, `Kbyte`, `Mbyte`, `Gbyte`, `Tbyte` (Nsight Compute)     | 1e3 steps (SI)   | `byte` |
| `B`, `KB`, `MB`, `GB`, `TB` (nvprof)            | 1024 steps      | `byte`          |
| `KiB`, `MiB`, `GiB`, `TiB` (nvidia-smi)         | 1024 steps      | `byte`          |
| `hz`, `Khz`, `MHz`, `GHz` (any case)            | 1e3 steps       | `Hz`            |
| `<bytes>/<time>` e.g. `GB/s`, `Gbyte/second`    | bytes / seconds | `byte/second`   |
| `<count>/<time>` e.g. `cycle/nsecond`, `inst/second` | count / seconds | `<count>/second` |
| `Kinst`, `Mcycle`, `Gsector`, ... (auto-scaled counts) | 1e3 steps | `inst`, `cycle`, `sector`, ... |
| `%`, `W`, `inst/cycle`, `warp`, `register/thread`, unknown units | 1 | as printed |

Why the two byte conventions: nvprof's `KB/MB/GB` are binary. In
`tool-outputs/nvprof_gtx1080_microgpusim.txt` the L2 read, L2 write, DRAM read and sysmem
write throughputs (printed in GB/s and MB/s) give the same kernel duration, 1.7530 us,
only when GB = 2^30 and MB = 2^20 bytes (decimal prefixes give 1.88 us and 1.84 us);
`tests/data/test_counters.py` checks this. Nsight Compute's `Kbyte/Mbyte/...` are SI (1000);
`ncu_command` asks for `--print-units base` anyway, so collected files need no scaling
(auto-scaled values are also rounded to a few digits, e.g. `2.33 Mbyte`).
"""

from __future__ import annotations

import math
import re

_TIME_NS = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6,
            "s": 1e9, "sec": 1e9, "second": 1e9}
_SI = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BIN = {"": 1.0, "K": 2.0**10, "M": 2.0**20, "G": 2.0**30, "T": 2.0**40}
# Base count units Nsight Compute auto-scales with an SI prefix (Kinst, Mcycle, ...).
_COUNTS = {"inst", "cycle", "sector", "warp", "request", "thread", "block", "wavefront",
           "transaction", "instruction", "register", "pass", "issue", "cluster", "op", "flop"}

_BYTES_NCU = re.compile(r"^([KMGTP]?)byte$")
_BYTES_NVPROF = re.compile(r"^([KMGT]?)B$")
_BYTES_IEC = re.compile(r"^([KMGT])iB$")
_HERTZ = re.compile(r"^([kmg]?)hz$", re.IGNORECASE)
_SCALED_COUNT = re.compile(r"^([KMGTP])([a-z]+)$")

# Thousands separators as Nsight Compute prints them: "5,443,677,824.00".
_GROUPED = re.compile(r"^[+-]?\d{1,3}(,\d{3})+(\.\d*)?$")
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def _amount(unit: str) -> tuple[float, str] | None:
    """Factor and base of a non-rate unit, or None when it is not a known scalable unit."""
    if unit in _TIME_NS:
        return _TIME_NS[unit], "ns"
    for pattern, table in ((_BYTES_NCU, _SI), (_BYTES_NVPROF, _BIN), (_BYTES_IEC, _BIN)):
        m = pattern.match(unit)
        if m:
            return table[m.group(1)], "byte"
    m = _HERTZ.match(unit)
    if m:
        return _SI[m.group(1).upper()], "Hz"
    if unit in _COUNTS:
        return 1.0, unit
    m = _SCALED_COUNT.match(unit)
    if m and m.group(2) in _COUNTS:
        return _SI[m.group(1)], m.group(2)
    return None


def normalize_unit(unit: str) -> tuple[float, str]:
    """The (factor, base unit) of a printed unit: ``value_in_base = printed_value * factor``.

    Unknown units are kept as printed with factor 1, never guessed.
    """
    unit = unit.strip()
    if not unit:
        return 1.0, ""
    if "/" in unit:
        num, _, den = unit.partition("/")
        head = _amount(num)
        if den in _TIME_NS and head is not None:
            # A rate: scale the numerator, convert the time to seconds.
            return head[0] * 1e9 / _TIME_NS[den], f"{head[1]}/second"
        if head is not None and head[1] != "ns":
            return head[0], f"{head[1]}/{den}"
        return 1.0, unit
    amount = _amount(unit)
    return amount if amount is not None else (1.0, unit)


def parse_number(text: str) -> float | None:
    """A finite float from a printed number (thousands separators allowed), else None."""
    t = text.strip()
    if _GROUPED.match(t):
        t = t.replace(",", "")
    elif not _NUMBER.match(t):
        return None
    value = float(t)
    return value if math.isfinite(value) else None


# nvprof summary values carry their unit: "126.024706GB/s", "100.000000%", "0.000000B/s".
_NVPROF_VALUE = re.compile(r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*([A-Za-z%/]+)$")
# nvprof utilization levels: "Idle (0)", "Low (2)", "Mid (5)", "High (8)", "Max (10)".
_LEVEL = re.compile(r"^(Idle|Low|Mid|High|Max)\s*\((\d+)\)$")

LEVEL_UNIT = "level (0-10)"


def split_value_unit(text: str) -> tuple[float, str] | None:
    """The (number, unit) of a value printed with its unit attached.

    E.g. ``126.02GB/s``, ``74.86 W``, ``Low (2)`` (unit :data:`LEVEL_UNIT`); None when the text is
    not of that form or the number not finite.
    """
    t = text.strip()
    m = _LEVEL.match(t)
    if m:
        return float(m.group(2)), LEVEL_UNIT
    m = _NVPROF_VALUE.match(t)
    if m:
        value = float(m.group(1))
        return (value, m.group(2)) if math.isfinite(value) else None
    return None
