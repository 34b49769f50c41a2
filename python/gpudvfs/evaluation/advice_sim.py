"""The dry run's advice against what the simulated GPU then saves when the advised pair is applied.

Per synthetic training step (a compute and a memory part and utilizations, `STEPS`) and seed, a
governor is set up as `GovernedTraining` sets it up on a `SimulatedDevice` (the simulator's clock
grid, the step prior from a first window, the catalog power shape, `STEP_PRIOR_SD`), then its
dry-run `GovernedLoop` observes ``windows`` windows passively, with the simulator's 1% noise on
time and power, at the pairs the driver's clocks ran: the default pair alone, or alternately the
default and a pair the driver pulled the core clock down to (``second``). The advice
(`gpudvfs.govern.advice`) against the default pair is scored on the simulator's noise-free time
and power (`SimulatedDevice.true_time_ms`, `true_power_w`): the realized saving is
1 - E(advised) / E(default) there. Nothing is fitted here: the interval's 1.645 is fixed,
`STEP_PRIOR_SD` and `MEMORY_SHARE` are the session's defaults.

``python -m gpudvfs.evaluation.advice_sim`` prints the figures.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpudvfs.govern.advice import Advice, phase_advice, setting_text
from gpudvfs.govern.clock_grid import clock_grid
from gpudvfs.govern.governor import Governor
from gpudvfs.govern.integrations.devices import SIM_CATALOG_NAME
from gpudvfs.govern.loop import GovernedLoop, nearest_config
from gpudvfs.govern.priors import STEP_PRIOR_SD, catalog_power_shape, step_prior
from gpudvfs.hardware.device import Workload
from gpudvfs.hardware.simulated import SimulatedDevice

#: Synthetic steps, compute-bound to memory-bound: (compute_ms, memory_ms) at the default clocks and
#: the SP and DRAM utilizations. Generic, not measured.
STEPS = {"compute": (1.0, 0.1, 0.8, 0.2), "mixed": (1.0, 0.5, 0.6, 0.4), "balanced": (1.0, 1.0, 0.5, 0.6),
         "memory": (0.3, 1.0, 0.3, 0.8), "light": (0.5, 0.2, 0.3, 0.2)}


@dataclass(frozen=True)
class Scored:
    """One step and seed: its advice, the saving realized applying it and the most any pair saves."""

    step: str
    seed: int
    advice: Advice
    realized: float
    best: float

    @property
    def covered(self) -> bool:
        """Whether the realized saving lies in the advice's 90% interval."""
        low, high = self.advice.energy_interval
        return low <= self.realized <= high


def workload(name: str) -> Workload:
    """The simulated workload of step ``name`` of `STEPS`."""
    compute, memory, sp, dram = STEPS[name]
    return Workload(name=f"advice-{name}", counters={"util:SP": sp, "util:INT": sp / 2, "util:L2": dram,
                                                     "util:DRAM": dram, "compute_ms": compute, "memory_ms": memory})


def score(name: str, seed: int, *, windows: int = 20, second: float | None = None,
          prior_sd: float = STEP_PRIOR_SD) -> Scored:
    """Advise step ``name`` after ``windows`` passive windows; ``second``: the pulled-down core clock's share."""
    dev = SimulatedDevice(seed=seed)
    grid = clock_grid(dev)
    shape, _ = catalog_power_shape(SIM_CATALOG_NAME, grid.default_mhz)
    w, rng = workload(name), np.random.default_rng(seed)
    gov = Governor(grid.configs, grid.default_index, prior_sd=prior_sd)
    loop = GovernedLoop(gov, dry_run=True)
    d = grid.default_index
    pairs = [d] if second is None else [d, nearest_config(grid.configs, (second * grid.default_mhz[0],
                                                                         grid.default_mhz[1]))]

    def measured(k: int) -> tuple[float, float]:
        core, mem = grid.configs[k]
        noise = 1.0 + dev.noise * rng.standard_normal(2)
        return dev.true_time_ms(w, core, mem) * noise[0], dev.true_power_w(w, core, mem) * noise[1]

    loop.phase("train", *step_prior(grid.configs, grid.default_mhz, *measured(d), shape), clocks=grid.configs[d])
    for i in range(windows):
        k = pairs[i % len(pairs)]
        t, p = measured(k)
        loop.step_end(time_ms=t, watts=p, clocks=grid.configs[k])
    advice = phase_advice(gov, "train", d)

    e = np.array([dev.true_time_ms(w, c, m) * dev.true_power_w(w, c, m) for c, m in grid.configs])
    return Scored(name, seed, advice, 1.0 - e[advice.index] / e[d], 1.0 - e.min() / e[d])


def main() -> None:
    """Print the figures: per setting, the predicted and realized savings and the interval's coverage."""
    for label, second, prior_sd in (("default pair only", None, STEP_PRIOR_SD),
                                    ("default + core at 85%", 0.85, STEP_PRIOR_SD),
                                    ("default only, prior_sd 0.1", None, 0.1),
                                    ("default only, prior_sd 0.4", None, 0.4)):
        rows = [score(n, s, second=second, prior_sd=prior_sd) for n in STEPS for s in range(3)]
        err = np.array([r.advice.energy_saving - r.realized for r in rows])
        print(f"{label}: mean |predicted - realized| {100 * np.mean(np.abs(err)):.1f} pts (max "
              f"{100 * np.max(np.abs(err)):.1f}), 90% interval covers {sum(r.covered for r in rows)}/{len(rows)}, "
              f"realized {100 * np.mean([r.realized for r in rows]):.1f}% of the "
              f"{100 * np.mean([r.best for r in rows]):.1f}% the best pair saves (means)")
        for r in rows[::3]:
            a = r.advice
            print(f"  {r.step:9s} seed {r.seed}: advised {setting_text(a.knob, a.setting)} predicted "
                  f"{100 * a.energy_saving:+.1f}% [{100 * a.energy_interval[0]:+.1f}, "
                  f"{100 * a.energy_interval[1]:+.1f}] realized {100 * r.realized:+.1f}% (best {100 * r.best:+.1f}%)")


if __name__ == "__main__":
    main()
