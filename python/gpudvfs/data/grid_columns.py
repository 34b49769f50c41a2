"""Grid CSVs of any origin: which column holds the workload, the clocks, time and power.

They are told from common names (``coreF``, ``core_frequency``, ``sm_app_clock``,
``time/ms``, ``run_time``, ``power/W``, ``average_power``, ``benchmark``, ...) or named by
the user (``--columns workload=bench,core_mhz=f_sm,time=t,time_unit=us``).

Names are compared without case, spaces or punctuation, after a trailing unit (``/ms``,
``_s``, ``(MHz)``, ``[W]``) is taken off; a time column's unit sets the conversion to
milliseconds.
"""

from __future__ import annotations

import re
import warnings

from gpudvfs.errors import GpudvfsWarning, InputError

#: role -> normalized names that play it. `app` is the workload; `kernel` and `args` refine it.
ROLE_NAMES: dict[str, tuple[str, ...]] = {
    "app": ("application", "app", "appname", "applicationname", "benchmark", "benchmarkname", "bench", "workload",
            "workloadname", "program", "job"),
    "kernel": ("kernel", "kernelname"),
    "args": ("argno", "args", "arguments"),
    "core_mhz": ("coref", "corefreq", "corefrequency", "coreclock", "core", "smappclock", "smclock", "smfreq",
                 "smfrequency", "graphicsclock", "gpcclock", "clockssm", "clocksapplicationsgraphics", "fcore",
                 "gpuclock", "gpufreq", "gpufrequency"),
    "mem_mhz": ("memf", "memfreq", "memfrequency", "memoryfrequency", "memclock", "memoryclock", "mem", "memappclock",
                "clocksmem", "clocksapplicationsmemory", "fmem", "memoryfreq"),
    "time": ("time", "runtime", "exectime", "executiontime", "elapsed", "elapsedtime", "duration", "kerneltime",
             "avgtime", "averagetime", "meantime"),
    "watts": ("power", "averagepower", "avgpower", "meanpower", "powerusage", "powerdraw", "watts", "boardpower"),
    # Energy in joules, where a file gives it instead of power (read as power over the time).
    "energy": ("energy", "joules", "energyconsumed", "totalenergy"),
}
#: Roles a grid must have; the others are optional.
REQUIRED = ("app", "core_mhz", "time")
#: Keys of ``--columns`` besides the roles (``workload`` is another name for ``app``).
ALIASES = {"workload": "app", "benchmark": "app", "application": "app"}
TIME_UNITS = {"ns": 1e-6, "us": 1e-3, "usec": 1e-3, "ms": 1.0, "msec": 1.0, "s": 1e3, "sec": 1e3, "secs": 1e3,
              "seconds": 1e3}
_UNITS = {**dict.fromkeys(TIME_UNITS, "time"), "mhz": "clock", "w": "power", "watt": "power", "watts": "power",
          "j": "energy"}
_ROLE_UNIT = {"core_mhz": "clock", "mem_mhz": "clock", "time": "time", "watts": "power", "energy": "energy"}
_UNIT_SUFFIX = re.compile(r"^(?P<base>.*?)[\s_/(\[-]+(?P<unit>[a-zA-Zµ]+)[)\]]?\s*$")


def parse_columns(text: str | None) -> dict[str, str]:
    """Parse ``role=column,...`` as ``--columns`` takes it (None or empty: none); ``time_unit=ms`` too.

    ``workload``, ``benchmark`` and ``application`` read as ``app``. Raises `InputError` if a
    pair is malformed, a role unknown or given twice, or the time unit unknown.
    """
    if not text:
        return {}
    out: dict[str, str] = {}
    for part in text.split(","):
        role, eq, column = part.partition("=")
        role = ALIASES.get(role.strip(), role.strip())
        if not eq or not column.strip():
            raise InputError(f"--columns takes ROLE=COLUMN pairs separated by commas, got {part!r}")
        if role not in (*ROLE_NAMES, "time_unit"):
            raise InputError(f"--columns: unknown role {role!r}; roles: workload, {', '.join(list(ROLE_NAMES)[1:])}, "
                             "time_unit")
        if role in out:
            raise InputError(f"--columns names {role} twice")
        out[role] = column.strip()
    if "time_unit" in out and out["time_unit"].lower() not in TIME_UNITS:
        raise InputError(f"--columns time_unit={out['time_unit']}: expected one of {', '.join(TIME_UNITS)}")
    return out


def _split_unit(name: str) -> tuple[str, str | None]:
    """(normalized name, unit or None): 'time/ms' -> ('time', 'ms'), 'Core Clock (MHz)' -> ('coreclock', 'mhz')."""
    m = _UNIT_SUFFIX.match(name.strip())
    if m and m.group("unit").lower().replace("µ", "u") in _UNITS and m.group("base"):
        base, unit = m.group("base"), m.group("unit").lower().replace("µ", "u")
    else:
        base, unit = name, None
    return re.sub(r"[^a-z0-9]", "", base.lower()), unit


def detect_roles(header: list[str], overrides: dict[str, str] | None = None) -> tuple[dict[str, str], float]:
    """Role -> column of a grid header, and the time column's factor to milliseconds.

    The user's overrides (:func:`parse_columns`) come first. A time column that does not give its
    unit is read as seconds, with a warning. Raises `InputError` if two columns could play a role,
    no column plays a required one (the message says how to name it), or an override names a
    column the header lacks.
    """
    overrides = dict(overrides or {})
    unit_given = overrides.pop("time_unit", None)
    for role, column in overrides.items():
        if column not in header:
            raise InputError(f"--columns {role}={column}: the header has no column {column!r} "
                             f"(columns: {', '.join(header)})")
    roles = dict(overrides)
    taken = set(overrides.values())
    units = {}
    for column in header:
        base, unit = _split_unit(column)
        units[column] = unit
        if column in taken:
            continue
        for role, names in ROLE_NAMES.items():
            if role in overrides or base not in names or (unit and _UNITS[unit] != _ROLE_UNIT.get(role)):
                continue
            if role in roles:
                raise InputError(f"columns {roles[role]!r} and {column!r} could both be the {role}: "
                                 f"name one with --columns {role}=COLUMN")
            roles[role] = column
    missing = [r for r in REQUIRED if r not in roles]
    if missing:
        raise InputError(f"no column for {', '.join(missing)} among {', '.join(header)}: name "
                         + ", ".join(f"--columns {'workload' if r == 'app' else r}=COLUMN" for r in missing))
    unit = (unit_given or units[roles["time"]] or "").lower()
    if not unit:
        warnings.warn(GpudvfsWarning(
            f"the time column {roles['time']!r} does not give its unit: read as seconds (relative errors and "
            "choices do not depend on it); pass --columns time_unit=ms (or us, ns) if not"), stacklevel=3)
        unit = "s"
    if _UNITS.get(unit) != "time":
        raise InputError(f"the time column {roles['time']!r} is in {unit!r}, not a time unit")
    return roles, TIME_UNITS[unit]

