"""Choosing the prior's core voltage curve (:mod:`gpudvfs.power.prior_curve`) by the energy its choice costs.

For each workload of each clock sweep (time and power measured at each core clock, the highest
memory clock): the prior's power over the core clocks, its level from the workload's measured
power at the clock nearest the GPU's default (every unit's utilization the same, solved from
it: the sweeps have no per-unit utilizations), times the measured time; its least-energy clock
against the measured least energy is the regret. A (knee, floor) pair is scored by its worst
GPU's mean regret (the target bounds every GPU; the mean over GPUs, also reported, lets the
Maxwell Titan X, which wants a flat curve, outvote the A40); each GPU's figure is that of the
pair chosen on the others.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from gpudvfs.catalog import lookup
from gpudvfs.data import read_measured_grid
from gpudvfs.errors import InputError
from gpudvfs.power.equations import power_grid
from gpudvfs.power.model import PowerModel
from gpudvfs.power.prior import rule_document
from gpudvfs.power.prior_curve import CURVE_KIND, CURVE_VERSION, core_curve

#: (catalog GPU, file under the data folder): every public sweep with time and power at each core clock.
SWEEP_FILES = (("a40", "perseus/bloom_a40_stages.csv"), ("a40", "perseus/gpt3-175b_a40_stages.csv"),
               ("v100-pcie", "nsfcac/v100_spec_dev.csv"), ("gtx-titan-x", "gpuptxmodel/titanx_microbenchmarks.csv"),
               ("gtx980", "nv-dvfs-benchmark/gtx980_time_power_dev.csv"))
#: The GPUs the chosen curve serves (Ampere on); the older keep the rule's own.
FROM_COMPUTE_CAPABILITY = 8.0
#: The candidates, fractions of the default clock (knee) and of its voltage (floor).
KNEES = tuple(round(0.2 + 0.05 * i, 2) for i in range(16))
FLOORS = tuple(round(0.5 + 0.05 * i, 2) for i in range(11))


@dataclass(frozen=True)
class Sweep:
    """One workload's sweep: core clocks (MHz, ascending), measured time (ms) and power (W)."""

    gpu: str
    name: str
    core_mhz: np.ndarray
    time_ms: np.ndarray
    watts: np.ndarray


def sweeps(data: Path) -> list[Sweep]:
    """Every workload of :data:`SWEEP_FILES` found under ``data``, at its highest memory clock.

    `InputError` if none is there or one has no measured power.
    """
    out = []
    for gpu, name in SWEEP_FILES:
        if not (data / name).exists():
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            g = read_measured_grid(data / name, "the prior's voltage curve")
        if g.watts is None:
            raise InputError(f"{data / name}: the prior's curve is scored on measured power; the grid has none")
        for w in dict.fromkeys(g.workload.tolist()):
            sel = g.workload == w
            if g.mem_mhz is not None:
                sel &= g.mem_mhz == g.mem_mhz[sel].max()
            o = np.argsort(g.core_mhz[sel])
            out.append(Sweep(gpu, f"{name}:{w}", g.core_mhz[sel][o], g.time_ms[sel][o], g.watts[sel][o]))
    if not out:
        raise InputError(f"{data}: none of the sweeps the prior's voltage curve is chosen on is there")
    return out


@cache
def _prior(gpu: str) -> PowerModel:
    return PowerModel.prior(gpu)


def regrets(s: Sweep, curves: list[list[float]]) -> np.ndarray:
    """Per [break, slope] curve, the extra energy (fraction) the prior's least-energy core clock of ``s`` costs.

    Over the measured least energy; every curve in one call of the Rust core.
    """
    model = _prior(s.gpu)
    k = int(np.argmin(np.abs(s.core_mhz - lookup(s.gpu).default_mhz[0])))
    static, idle = model.static_w_, model.idle_w_
    weights = np.array(list(model.weights_.values()))
    busy = float(np.clip((s.watts[k] - static.sum() - idle.sum()) / weights.sum(), 0, 1))
    x = s.core_mhz / s.core_mhz[k]
    volts = np.concatenate([1 + slope * (np.maximum(0, x - xb) - max(0.0, 1 - xb)) for xb, slope in curves])
    ones = np.ones_like(volts)
    p = power_grid(np.full((1, len(weights)), busy), model.domain_sizes_, static, idle, weights,
                   np.column_stack([np.tile(x, len(curves)), ones]), np.column_stack([volts, ones]))[0]
    energy = s.watts * s.time_ms
    return energy[np.argmin(p.reshape(len(curves), len(x)) * s.time_ms, axis=1)] / energy.min() - 1


def _per_gpu(ss: list[Sweep], curves: list[list[float]]) -> list[dict[str, float]]:
    """Per curve, each GPU's mean regret over its sweeps."""
    by: dict[str, list[np.ndarray]] = {}
    for s in ss:
        by.setdefault(s.gpu, []).append(regrets(s, curves))
    return [{g: float(np.mean([r[i] for r in v])) for g, v in by.items()} for i in range(len(curves))]


def choose_curve(data: Path) -> dict[str, Any]:
    """The knee and floor chosen leaving each GPU out, and on all for the shipped document.

    ``document``: the curve document (chosen on all GPUs); ``per_gpu``: each GPU's mean regret
    (%) under the rule's own curve (``before``), under the pair chosen on the other GPUs
    (``after``, with that ``knee`` and ``floor``), under the pair the mean over the other GPUs
    would choose (``after_by_mean``), and under the curve the prior gives it (``prior``);
    ``moves``: each GPU's regret (%) with the shipped knee or floor moved a step either way.
    """
    ss = sweeps(data)
    pairs = [(k, f) for k in KNEES for f in FLOORS]
    *scores, before = _per_gpu(ss, [core_curve(k, f) for k, f in pairs] + [rule_document()["curves"][0]])
    table = dict(zip(pairs, scores))
    gpus = list(dict.fromkeys(s.gpu for s in ss))

    def best(among: list[str], score: Any = np.max) -> tuple[float, float]:
        return min(table, key=lambda kf: float(score([table[kf][g] for g in among])))

    per_gpu = {}
    for g in gpus:
        others = [h for h in gpus if h != g]
        k, f = best(others)
        after = 100 * table[(k, f)][g]
        newer = float(lookup(g).compute_capability) >= FROM_COMPUTE_CAPABILITY
        per_gpu[g] = {"before": 100 * before[g], "after": after, "knee": k, "floor": f,
                      "after_by_mean": 100 * table[best(others, np.mean)][g],
                      "prior": after if newer else 100 * before[g]}
    knee, floor = best(gpus)
    moves = {}
    for dk, df in ((-0.05, 0), (0.05, 0), (0, -0.05), (0, 0.05)):
        kf = (round(knee + dk, 2), round(floor + df, 2))
        if kf in table:
            moves[f"knee {kf[0]:g}, floor {kf[1]:g}"] = {g: 100 * r for g, r in table[kf].items()}
    doc = {"kind": CURVE_KIND, "version": CURVE_VERSION, "knee": knee, "floor": floor,
           "from_compute_capability": FROM_COMPUTE_CAPABILITY,
           "chosen_on": sorted(gpus), "files": [name for _, name in SWEEP_FILES if (data / name).exists()]}
    return {"document": doc, "per_gpu": per_gpu, "moves": moves}
