"""`SimulatedDevice`: a physically plausible GPU whose ground truth can be read back.

Power follows the power paper's Eq. 4 per domain (static + idle-of-the-V-F-level +
per-component dynamic power) with a core voltage that is flat up to a break frequency
and linear above it, and a memory voltage per memory clock. Kernel time comes from the
time paper's model (default mode) with the simulator's own device parameters when a
workload is described by nvprof counters; otherwise from a compute part scaling with 1/fc
and a memory part scaling with 1/fm combined by a smooth maximum, plus a launch latency.
The latency suite's pointer chases report cycles per access (DRAM: Eq. 4's law; L2 and
shared: constants) and its bandwidth benchmark moves bytes at the DRAM delay law. The
power sensor refreshes at a period with relative noise; measurements run on a virtual
clock, so a one-second measurement costs no real second. Noise is drawn from a generator
seeded by (seed, workload, clocks): a measurement repeated in another run, or after a
resumed sweep, gives the same numbers.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from gpudvfs.data.counters import COMPONENTS, DOMAIN_SIZES
from gpudvfs.errors import InputError
from gpudvfs.hardware.device import ClockPermissionError, Measurement, Workload
from gpudvfs.hardware.kernels import benchmark
from gpudvfs.power.equations import power_grid
from gpudvfs.time import KernelProfile, TimeDevice, TimeModel

# The GTX Titan X's core clock levels (MHz), as in the public gpmTOOL measurements.
CORE_LEVELS = (1164.0, 1126.0, 1088.0, 1050.0, 1013.0, 975.0, 937.0, 899.0, 861.0, 823.0,
               785.0, 747.0, 709.0, 671.0, 633.0, 595.0)


@dataclass(frozen=True)
class SimulatedGpu:
    """Ground truth of the simulated GPU (a GTX Titan X-like board).

    Parameters
    ----------
    uuid : str, optional
        A chip of a simulated fleet (`chips.chip_gpu`); None: the one default GPU.
    domain_sizes : tuple of int
        Components per voltage domain (core, memory).
    clocks : dict
        Memory clock -> supported core clocks, MHz; the lowest memory clock allows fewer.
    static_w, idle_w : tuple of float
        Per domain, W: static times the normalized voltage; idle times V^2 f/f_ref.
    weights_w : tuple of float
        Dynamic power per component at full utilization, W, at the reference.
    v_break_mhz, v_low : float
        The core voltage is flat at ``v_low`` (relative to the default clock's) up to this clock.
    mem_volts : dict
        Memory clock -> memory voltage, relative to the default clock's.
    time_device : TimeDevice
        The time model's parameters of this GPU (what the latency suite measures).
    regime_sharpness : float
        The exponent of the smooth maximum of compute and memory time.
    """

    name: str = "gpudvfs simulated GPU"
    uuid: str | None = None
    components: tuple[str, ...] = COMPONENTS
    domain_sizes: tuple[int, ...] = DOMAIN_SIZES
    default_mhz: tuple[float, float] = (975.0, 3505.0)
    clocks: dict[float, tuple[float, ...]] = field(default_factory=lambda: {
        3505.0: CORE_LEVELS,
        3300.0: CORE_LEVELS,
        810.0: CORE_LEVELS[5:],
    })
    static_w: tuple[float, ...] = (45.0, 8.0)
    idle_w: tuple[float, ...] = (20.0, 6.0)
    weights_w: tuple[float, ...] = (60.0, 35.0, 70.0, 30.0, 25.0, 30.0, 40.0)
    v_break_mhz: float = 700.0
    v_low: float = 0.88
    mem_volts: dict[float, float] = field(default_factory=lambda: {3505.0: 1.0, 3300.0: 0.97, 810.0: 0.9})
    time_device: TimeDevice = field(default_factory=lambda: TimeDevice(
        sm_count=24, max_warps_per_sm=64, dm_lat_a=210.0, dm_lat_b=290.0, dm_del_a=700.0, dm_del_b=8.5,
        l2_lat=210.0, l2_del=1.0, sh_lat=30.0, sh_del=1.0, inst_cycle=0.25, overlap_p=6.0, dp_inst_cycle=8.0,
        name="sim"))
    launch_ms: float = 0.005
    regime_sharpness: float = 4.0

    def core_volts(self, core_mhz: ArrayLike) -> np.ndarray:
        """The core voltage at each clock (MHz), 1 at the default: flat at ``v_low`` up to the break, then linear."""
        rise = np.maximum(0.0, np.asarray(core_mhz, dtype=float) - self.v_break_mhz)
        return self.v_low + (1.0 - self.v_low) * rise / (self.default_mhz[0] - self.v_break_mhz)

    def volts(self, core_mhz: float, mem_mhz: float) -> tuple[float, float]:
        """(core, memory) voltage of a supported clock pair, relative to the default clocks'."""
        return float(self.core_volts(core_mhz)), self.mem_volts[mem_mhz]

    def power(self, util: ArrayLike, core_mhz: float, mem_mhz: float) -> float:
        """True average power, W, of a workload with per-component ``util`` (Eq. 4 per domain)."""
        return float(self.power_at(util, [core_mhz], mem_mhz)[0])

    def power_at(self, util: ArrayLike, core_mhz: ArrayLike, mem_mhz: float) -> np.ndarray:
        """`power` at each core clock of ``core_mhz`` (MHz), in one call of the Rust core."""
        core = np.asarray(core_mhz, dtype=float).ravel()
        freqs = np.column_stack([core / self.default_mhz[0], np.full(len(core), mem_mhz / self.default_mhz[1])])
        volts = np.column_stack([self.core_volts(core), np.full(len(core), self.mem_volts[mem_mhz])])
        return power_grid(np.atleast_2d(util), self.domain_sizes, self.static_w, self.idle_w, self.weights_w,
                          freqs, volts)[0]

    def capped_core(self, util: ArrayLike, core_mhz: float, mem_mhz: float, limit_w: float | None) -> float:
        """The core clock (MHz) the driver runs under a power limit (None: none), ``core_mhz`` set.

        The highest listed core clock at or below ``core_mhz`` whose power fits, the lowest where none does.
        """
        if limit_w is None or self.power(util, core_mhz, mem_mhz) <= limit_w:
            return float(core_mhz)
        cores = [c for c in self.clocks[mem_mhz] if c <= core_mhz]
        fits = [c for c, w in zip(cores, self.power_at(util, cores, mem_mhz)) if w <= limit_w]
        return float(max(fits) if fits else min(self.clocks[mem_mhz]))

    def time_ms(self, compute_ms: float, memory_ms: float, core_mhz: float, mem_mhz: float) -> float:
        """True ms per launch: compute and memory ms at the default clocks scaled by 1/fc, 1/fm; smooth maximum."""
        c = compute_ms * self.default_mhz[0] / core_mhz
        m = memory_ms * self.default_mhz[1] / mem_mhz
        p = self.regime_sharpness
        return (c**p + m**p) ** (1.0 / p) + self.launch_ms


@dataclass(frozen=True)
class SimProfile:
    """What a simulated workload does.

    ``util`` is per component, at any clock (the power model's assumption); ``compute_ms`` and
    ``memory_ms`` are at the default clocks and unused where ``kernel`` gives the time-model inputs.
    """

    util: np.ndarray
    compute_ms: float
    memory_ms: float
    kernel: KernelProfile | None = None


# Longest launch the simulator takes from a workload description (an hour): beyond it a
# value is a typo, and times scaled to the lowest clocks must stay finite.
MAX_LAUNCH_MS = 3.6e6

# Bytes the bandwidth benchmark moves per launch (sectors of 32 B, as DRAM transactions).
BANDWIDTH_BYTES = 256 * 2**20


def _kernel_profile(kernel: str, gpu: SimulatedGpu) -> SimProfile:
    """A power-suite microbenchmark, emulated from what it is designed to stress.

    Its ``stresses`` are its utilizations; the busiest core-domain unit sets its compute time
    and its DRAM stress its memory time (1 ms each at full load at the default clocks).
    """
    b = benchmark(kernel)
    util = np.array([float(b.stresses.get(n, 0.0)) for n in gpu.components])
    core = [j for j, n in enumerate(gpu.components) if n != "DRAM"]
    dram = gpu.components.index("DRAM")
    # Even an idle kernel launches: a floor keeps its time finite and clock-dependent.
    return SimProfile(util, max(float(util[core].max()), 0.05), float(util[dram]))


def profile_of(workload: Workload, gpu: SimulatedGpu) -> SimProfile:
    """A workload's simulated behaviour.

    A manifest microbenchmark's comes from its design (``kernel=``), else from ``counters``:
    ``util:<component>`` in [0, 1] (missing ones are 0) and either nvprof counters (``warps``,
    ``achieved_occupancy``, ... as the time model reads them; time from that model) or
    ``compute_ms`` / ``memory_ms`` at the default clocks. Raises `InputError` where counters are
    out of range or unknown.
    """
    if workload.kernel is not None:
        return _kernel_profile(workload.kernel, gpu)
    c = workload.counters
    util = np.array([float(c.get(f"util:{n}", 0.0)) for n in gpu.components])
    if np.any(~np.isfinite(util)) or np.any(util < 0) or np.any(util > 1):
        raise InputError(f"workload {workload.name!r}: utilizations must be in [0, 1]")
    if "warps" in c:
        counters = {k: v for k, v in c.items() if not k.startswith("util:")}
        return SimProfile(util, 0.0, 0.0, KernelProfile.from_counters(workload.name, counters, device=gpu.time_device))
    unknown = set(c) - {f"util:{n}" for n in gpu.components} - {"compute_ms", "memory_ms"}
    if unknown:
        raise InputError(f"workload {workload.name!r}: unknown simulated counters {sorted(unknown)}")
    compute, memory = float(c.get("compute_ms", 0.0)), float(c.get("memory_ms", 0.0))
    if not (0 <= compute <= MAX_LAUNCH_MS and 0 <= memory <= MAX_LAUNCH_MS and compute + memory > 0):
        raise InputError(f"workload {workload.name!r}: compute_ms and memory_ms must be in [0, {MAX_LAUNCH_MS:g}], "
                         "not both 0")
    return SimProfile(util, compute, memory)


def _time_suite(name: str, gpu: SimulatedGpu, fc: float, fm: float) -> tuple[float, dict[str, float]]:
    """(ms per launch, what the benchmark reports) of the latency suite's benchmarks."""
    d = gpu.time_device
    b = benchmark(name)
    if b.launch.get("policy") in ("chase", "shared_chase"):
        steps = float(b.launch["steps"])
        if b.launch["policy"] == "shared_chase":
            cycles = d.sh_lat
        elif b.launch.get("footprint") == "l2":
            cycles = d.l2_lat
        else:
            cycles = d.dm_lat_a * fc / fm + d.dm_lat_b
        return steps * cycles / (fc * 1e3), {"cycles_per_access": cycles}
    # Bandwidth: the DRAM busy time of the time model (each SM's share of the transactions
    # served one DRAM delay apart).
    return float(d.dram_busy_ms(BANDWIDTH_BYTES / 32, fm)), {"bytes": float(BANDWIDTH_BYTES)}


def _is_time_suite(kernel: str) -> bool:
    return benchmark(kernel).suite == "time"


class SimulatedDevice:
    """The `Device` protocol (`gpudvfs.hardware.device.Device`) on a `SimulatedGpu`; methods say what differs.

    Parameters
    ----------
    noise, time_noise : float
        Relative standard deviation of one power-sensor sample, of one timed launch series.
    refresh_s : float
        The power sensor's refresh period.
    energy_counter : bool
        Whether power comes from an energy counter or from integrated samples.
    permission : bool
        False makes clock changes fail like an unprivileged process's.
    power_limit_w : float, optional
        What `run` runs under: the driver lowers the core clock (`SimulatedGpu.capped_core`), `clocks`
        and `throttle_reasons` say so. `measure` (sweeps) runs at the clocks set and flags a
        measurement above it as throttled. None: the board's default, `POWER_LIMITS_W`, never
        reached. `set_power_limit` sets it.

    Raises
    ------
    InputError
        Where a noise is negative or the refresh period not positive.
    """

    #: The board's power limits, W (default, min, max): the GTX Titan X's 250 W TDP (the catalog's) and a
    #: settable range like a board's; not measured.
    POWER_LIMITS_W = (250.0, 150.0, 275.0)

    def __init__(self, gpu: SimulatedGpu | None = None, seed: int = 0, noise: float = 0.01,
                 time_noise: float = 0.005, refresh_s: float = 0.02, energy_counter: bool = True,
                 permission: bool = True, power_limit_w: float | None = None) -> None:
        if noise < 0 or time_noise < 0 or refresh_s <= 0:
            raise InputError("noise and time_noise must be >= 0 and refresh_s > 0")
        self.gpu = gpu or SimulatedGpu()
        self.name = self.gpu.name
        self.seed = seed
        self.noise, self.time_noise, self.refresh_s = noise, time_noise, refresh_s
        self.has_energy_counter = energy_counter
        self.permission = permission
        self.power_limit_w = self._power_limit_found = power_limit_w
        self._clocks = self.gpu.default_mhz
        self._now_s = 0.0
        self._energy_j = 0.0
        self._running_w = 0.0  # true power of what `run` last ran
        self._last_run: Workload | None = None  # what `run` last ran

    # clocks
    def memory_clocks(self) -> list[float]:
        """The ground truth's memory clocks."""
        return sorted(self.gpu.clocks, reverse=True)

    def core_clocks(self, mem_mhz: float) -> list[float]:
        """The ground truth's core clocks at ``mem_mhz``."""
        if mem_mhz not in self.gpu.clocks:
            raise InputError(f"unsupported memory clock {mem_mhz} MHz; supported: {self.memory_clocks()}")
        return sorted(self.gpu.clocks[mem_mhz], reverse=True)

    def default_clocks(self) -> tuple[float, float]:
        """The ground truth's default clocks."""
        return self.gpu.default_mhz

    def sm_count(self) -> int:
        """Streaming multiprocessors, from the ground truth's time device."""
        return int(self.gpu.time_device.sm_count)

    def identity(self) -> dict[str, str | float | bool | None]:
        """The settings and a hash of the ground truth."""
        gpu = json.dumps(asdict(self.gpu), sort_keys=True, default=str)
        return {"kind": "simulated", "name": self.name, "uuid": self.gpu.uuid, "seed": self.seed, "noise": self.noise,
                "time_noise": self.time_noise, "refresh_s": self.refresh_s,
                "energy_counter": self.has_energy_counter, "power_limit_w": self.power_limit_w,
                "gpu": hashlib.sha256(gpu.encode()).hexdigest()[:16]}

    def check(self, workload: Workload) -> None:
        """A callable alone is refused (the simulator runs no code), and counters that give no finite time."""
        if workload.kernel is None and workload.fn is not None and not workload.counters:
            raise InputError(f"workload {workload.name!r} is a callable ({workload.spec or workload.fn!r}): the "
                             "simulated GPU runs no code; describe it with 'counters' for --device sim, "
                             "or run it on --device nvml")
        lowest = min((min(self.core_clocks(m)), m) for m in self.memory_clocks())
        for fc, fm in (lowest, self.gpu.default_mhz):
            t = self.true_time_ms(workload, fc, fm)
            if not (math.isfinite(t) and t > 0):
                raise InputError(f"workload {workload.name!r}: its counters give no finite time at "
                                 f"{fc:g}/{fm:g} MHz ({t!r} ms)")

    def lock_clocks(self, core_mhz: float, mem_mhz: float) -> None:
        """Fails with `ClockPermissionError` where made with ``permission=False``."""
        if not self.permission:
            raise ClockPermissionError(
                "setting clocks needs root (simulated: SimulatedDevice(permission=False))")
        if core_mhz not in self.core_clocks(mem_mhz):
            raise InputError(f"unsupported core clock {core_mhz} MHz at memory {mem_mhz} MHz")
        self._clocks = (float(core_mhz), float(mem_mhz))

    def lock_core_clock(self, core_mhz: float) -> None:
        """As `lock_clocks`, the memory clock where it is (the simulated driver does not move it)."""
        self.lock_clocks(core_mhz, self._clocks[1])

    def reset_clocks(self) -> None:
        """Return to the default clocks and the power limit it was made with."""
        self._clocks = self.gpu.default_mhz
        self.power_limit_w = self._power_limit_found

    def power_limits(self) -> dict[str, float | None]:
        """`POWER_LIMITS_W`, the enforced one ``power_limit_w`` where set."""
        default, low, high = self.POWER_LIMITS_W
        enforced = default if self.power_limit_w is None else self.power_limit_w
        return {"enforced": enforced, "default": default, "min": low, "max": high}

    def set_power_limit(self, watts: float) -> None:
        """As ``lock_clocks``: `ClockPermissionError` without permission; `InputError` outside the range."""
        if not self.permission:
            raise ClockPermissionError("setting the power limit needs root (simulated: "
                                       "SimulatedDevice(permission=False))")
        _, low, high = self.POWER_LIMITS_W
        if not (math.isfinite(watts) and low <= watts <= high):
            raise InputError(f"power limit {watts!r} W is outside the {low:g}-{high:g} W {self.name} takes")
        self.power_limit_w = float(watts)

    def close(self) -> None:
        """Nothing to release."""

    @property
    def clocks(self) -> tuple[float, float]:
        """The (core, memory) MHz the GPU runs at now: what `run` last ran runs at (`running_clocks`)."""
        return self.running_clocks(self._last_run)

    def running_clocks(self, workload: Workload | None, clocks: tuple[float, float] | None = None,
                       limit_w: float | None = None) -> tuple[float, float]:
        """The (core, memory) MHz ``workload`` runs at (None: idle, at those set) from ``clocks`` (None: those set).

        Under ``limit_w`` (None: ``power_limit_w``) the core clock is lowered (`SimulatedGpu.capped_core`).
        """
        fc, fm = self._clocks if clocks is None else clocks
        limit = self.power_limit_w if limit_w is None else limit_w
        if workload is None or limit is None:
            return fc, fm
        return self.gpu.capped_core(profile_of(workload, self.gpu).util, fc, fm, limit), fm

    # sensors
    def _idle_power(self) -> float:
        return self.gpu.power(np.zeros(len(self.gpu.components)), *self._clocks)

    def power_watts(self) -> float:
        """The idle power at the current clocks."""
        return self._idle_power()

    def energy_joules(self) -> float | None:
        """Advanced by `run` and `measure` on the virtual clock; None where made with ``energy_counter=False``."""
        return self._energy_j if self.has_energy_counter else None

    def throttle_reasons(self) -> tuple[str, ...]:
        """``("sw_power_cap",)`` while the limit lowers the core clock of what `run` last ran, or it draws more."""
        capped = self.power_limit_w is not None and (self.clocks[0] < self._clocks[0]
                                                     or self._running_w > self.power_limit_w)
        return ("sw_power_cap",) if capped else ()

    def temperature_c(self) -> float:
        """35 C plus 0.25 C per idle watt."""
        return 35.0 + 0.25 * self._idle_power()

    # workloads
    def _rng(self, workload: Workload, salt: str) -> np.random.Generator:
        key = f"{self.seed}|{workload.name}|{self._clocks[0]:.4f}|{self._clocks[1]:.4f}|{salt}"
        return np.random.default_rng(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little"))

    def profile(self, workload: Workload) -> dict[str, float]:
        """Utilizations with a little measurement noise (inside [0, 1]); nvprof counters exact."""
        prof = profile_of(workload, self.gpu)
        rng = self._rng(workload, "profile")
        # Counter-derived utilizations carry a little measurement noise, kept inside [0, 1];
        # event counts (the time model's inputs) are exact.
        util = np.clip(prof.util * (1.0 + 0.002 * rng.standard_normal(len(prof.util))), 0.0, 1.0)
        out = {name: float(u) for name, u in zip(self.gpu.components, util)}
        if prof.kernel is not None:
            out |= {k: float(v) for k, v in workload.counters.items() if not k.startswith("util:")}
        return out

    def true_time_ms(self, workload: Workload, core_mhz: float, mem_mhz: float) -> float:
        """Noise-free ms per launch: the ground truth the demo compares predictions with."""
        if workload.kernel is not None and _is_time_suite(workload.kernel):
            return _time_suite(workload.kernel, self.gpu, core_mhz, mem_mhz)[0]
        prof = profile_of(workload, self.gpu)
        if prof.kernel is not None:
            return float(TimeModel(self.gpu.time_device).predict(prof.kernel, core_mhz, mem_mhz))
        return self.gpu.time_ms(prof.compute_ms, prof.memory_ms, core_mhz, mem_mhz)

    def true_power_w(self, workload: Workload, core_mhz: float, mem_mhz: float) -> float:
        """Noise-free average power, W, while the workload runs."""
        return self.gpu.power(profile_of(workload, self.gpu).util, core_mhz, mem_mhz)

    def run(self, workload: Workload | None, seconds: float) -> None:
        """Let a workload (None: idle) run ``seconds`` at `running_clocks`: the counter advances by its true power."""
        if not (math.isfinite(seconds) and seconds >= 0):
            raise InputError(f"seconds must be finite and >= 0, got {seconds}")
        watts = self._idle_power() if workload is None else self.true_power_w(workload, *self.running_clocks(workload))
        self._running_w, self._last_run = watts, workload
        self._now_s += seconds
        self._energy_j += watts * seconds

    def measure(self, workload: Workload, min_seconds: float = 1.0,
                repetitions: int | None = None) -> Measurement:
        """The truth with the sensors' noise, on the virtual clock, seeded by (seed, workload, clocks)."""
        if repetitions is not None and repetitions < 1:
            raise InputError("repetitions must be at least 1")
        if min_seconds <= 0 and repetitions is None:
            raise InputError("min_seconds must be > 0")
        fc, fm = self._clocks
        rng = self._rng(workload, "measure")
        t_ms = self.true_time_ms(workload, fc, fm)
        p_true = self.true_power_w(workload, fc, fm)
        result: dict[str, float] = {}
        if workload.kernel is not None and _is_time_suite(workload.kernel):
            _, result = _time_suite(workload.kernel, self.gpu, fc, fm)
            if "cycles_per_access" in result:  # in-kernel clock() readings jitter a little
                result["cycles_per_access"] *= 1.0 + 0.002 * rng.standard_normal()
        reps = repetitions if repetitions is not None else max(1, math.ceil(min_seconds * 1e3 / t_ms))
        duration = reps * t_ms / 1e3
        # The average of n sensor samples has relative noise noise/sqrt(n); an energy
        # counter integrates the true power, so its error is the same in the limit.
        n_samples = max(1, int(duration / self.refresh_s))
        watts = p_true * (1.0 + self.noise / math.sqrt(n_samples) * rng.standard_normal())
        time_ms = t_ms * (1.0 + self.time_noise * rng.standard_normal())
        self._now_s += duration
        self._energy_j += p_true * duration
        throttled = self.power_limit_w is not None and p_true > self.power_limit_w
        return Measurement(
            workload=workload.name, core_mhz=fc, mem_mhz=fm, time_ms=time_ms, watts=watts,
            joules=watts * duration, repetitions=reps, duration_s=duration,
            power_source="energy-counter" if self.has_energy_counter else "sampled",
            throttled=throttled, throttle_reasons=("sw_power_cap",) if throttled else (),
            temperature_c=35.0 + 0.25 * p_true, result=result,
        )
