"""A small synthetic gpmTOOL power dataset, generated from the power equations with a
known voltage curve, so the CLI can be tried without measurement files or a GPU."""

from __future__ import annotations

import numpy as np

from .datasets import PowerDataset
from .power_equations import power_grid

COMPONENTS = ("SP", "INT", "DP", "SFU", "L2", "Shared", "DRAM")
DOMAIN_SIZES = (6, 1)
REFERENCE_MHZ = (975.0, 3505.0)
CORE_MHZ = (595.0, 785.0, 975.0, 1164.0)
MEM_MHZ = (810.0, 3505.0)
# Ground truth (watts): static and idle terms per domain, dynamic weight per component.
STATIC = (45.0, 8.0)
IDLE = (20.0, 6.0)
WEIGHTS = (60.0, 35.0, 70.0, 30.0, 25.0, 30.0, 40.0)


BREAK_MHZ = 700.0
V_LOW = 0.88


def core_voltage(core_mhz: np.ndarray) -> np.ndarray:
    """Flat up to a break frequency, then linear, 1 at the reference: the shape Guerreiro
    et al. observe."""
    rise = np.maximum(0.0, core_mhz - BREAK_MHZ) / (REFERENCE_MHZ[0] - BREAK_MHZ)
    return V_LOW + (1.0 - V_LOW) * rise


def sample_power_dataset(n_benchmarks: int = 12, seed: int = 0, noise: float = 0.01) -> PowerDataset:
    """Benchmarks with random utilizations at every (fc, fm) pair, power with relative noise."""
    if n_benchmarks < 1:
        raise ValueError("n_benchmarks must be at least 1")
    rng = np.random.default_rng(seed)
    util = rng.uniform(0.0, 1.0, (n_benchmarks, len(COMPONENTS))) * rng.uniform(0.0, 1.0, (n_benchmarks, 1))
    util = np.round(util, 5)
    configs = np.array([(fc, fm) for fm in MEM_MHZ for fc in CORE_MHZ])
    freqs = configs / np.array(REFERENCE_MHZ)
    volts = np.column_stack([core_voltage(configs[:, 0]), np.ones(len(configs))])
    watts = power_grid(util, DOMAIN_SIZES, STATIC, IDLE, WEIGHTS, freqs, volts)
    watts = np.round(watts * (1.0 + noise * rng.standard_normal(watts.shape)), 4)
    n_conf = len(configs)
    names = tuple(f"bench{b + 1}" for b in range(n_benchmarks) for _ in range(n_conf))
    return PowerDataset(
        path="<sample>",
        reference_mhz=REFERENCE_MHZ,
        domain_sizes=DOMAIN_SIZES,
        components=COMPONENTS,
        watts=watts.reshape(-1),
        freqs_mhz=np.tile(configs, (n_benchmarks, 1)),
        utilization=np.repeat(util, n_conf, axis=0),
        row_names=names,
        benchmark=np.repeat(np.arange(n_benchmarks), n_conf),
        benchmarks=tuple(f"bench{b + 1}" for b in range(n_benchmarks)),
    )
