"""Fitting the prior's SFU and tensor weights (:mod:`gpudvfs.power.prior_pipes`) and scoring them by kernel.

Each kernel's power at the clocks it was measured at is linear in the two weights:
``P = P0 + w_sfu g_sfu + w_tensor g_tensor``, ``g = tdp U V^2 f`` (W per unit of weight over
TDP). Each weight is the relative least-squares fit on its kernels (>= 0); its figure is each
kernel predicted by the weight fitted without it (leave one kernel out).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gpudvfs import _core
from gpudvfs.catalog import DeviceSpec, lookup
from gpudvfs.data.counters import COMPONENTS, power_utilizations
from gpudvfs.data.jsonfile import read_json
from gpudvfs.data.profilers.ncu import read_ncu_csv
from gpudvfs.errors import InputError
from gpudvfs.power.prior import prior_state, rule_document
from gpudvfs.power.prior_curve import shipped_curves
from gpudvfs.power.prior_pipes import PIPES_KIND, PIPES_VERSION, share_widening

#: The H200's kernels that run on tensor cores (cuBLAS bf16 GEMM, flash attention); the others use none.
TENSOR_KERNELS = ("gemm_bf16", "sdpa")
H200_KERNELS = (*TENSOR_KERNELS, "layernorm", "elementwise")
_SFU = COMPONENTS.index("SFU")


@dataclass(frozen=True)
class Kernel:
    """One kernel measured at one clock pair: its power without the two weights and per unit of each (W).

    ``base_w`` is the rule's power with the SFU weight 0 and no tensor term; ``sfu_w`` and
    ``tensor_w`` the power one TDP of weight adds at this kernel's SFU and tensor activity.
    """

    gpu: str
    name: str
    watts: float
    base_w: float
    sfu_w: float
    tensor_w: float


def _kernel(spec: DeviceSpec, name: str, profile: Path, clocks: tuple[float, float], watts: float,
            tensor: float) -> Kernel:
    counters = read_ncu_csv(profile).kernels[0]
    util = power_utilizations(counters)
    u = np.array([[util[c] or 0.0 for c in COMPONENTS]])
    # At the default clocks on the shipped curve, as `gpudvfs predict` places the prior.
    state = prior_state(spec, configs=[clocks], curves=shipped_curves(spec))
    weights = np.array(state["weights"])

    def at(w: np.ndarray, uu: np.ndarray) -> float:
        fit = _core.PowerFit.from_state(state | {"weights": w.tolist()})
        return float(fit.predict(np.ascontiguousarray(uu), np.array([clocks[0]]), np.array([clocks[1]]))[0])

    no_sfu = weights.copy()
    no_sfu[_SFU] = 0.0
    one = no_sfu.copy()
    one[_SFU] = float(spec.tdp_w)
    unit = np.eye(len(COMPONENTS))[[_SFU]]
    v2f_tdp = at(one, unit) - at(no_sfu, unit)  # tdp V^2 f at these clocks
    return Kernel(spec.key, name, watts, at(no_sfu, u), v2f_tdp * u[0, _SFU], v2f_tdp * tensor)


def h100_kernels(folder: Path) -> list[Kernel]:
    """The H100's kernels at the driver's clocks: the power suite and the applications, with their profiles."""
    spec = lookup("h100-sxm")
    rows = [r for f in ("power-suite.csv", "apps.csv") for r in csv.DictReader(open(folder / f, encoding="utf-8"))]
    if not rows:
        raise InputError(f"{folder}: no measured kernels in power-suite.csv or apps.csv")
    return [_kernel(spec, r["workload"], folder / "ncu" / f"{r['workload']}.ncu.csv",
                    (float(r["core_mhz"]), float(r["mem_mhz"])), float(r["watts"]), 0.0) for r in rows]


def gpm_pipe(folder: Path) -> dict[str, float]:
    """Median GPM busiest-pipe activity of each kernel of the H200's varied load (``observe-varied``).

    The load's clock (``load.json``) and the readings' start apart: the first busy reading is
    aligned with the first kernel's start, and a second at each end of a phase is left out.
    """
    phases = [p for p in read_json(folder / "observe-varied" / "load.json") if p["phase"] != "idle"]
    with open(folder / "observe-varied" / "readings.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(line for line in fh if not line.startswith("#")))
    t = np.array([float(r["t_s"]) for r in rows])
    sm, pipe = (np.array([float(r[k]) for r in rows]) for k in ("sm", "pipe"))
    if not phases or not (sm > 0.5).any():
        raise InputError(f"{folder / 'observe-varied'}: no kernel phase or no busy reading")
    offset = t[np.argmax(sm > 0.5)] - phases[0]["start_s"]
    out = {}
    for p in phases:
        sel = (t >= p["start_s"] + offset + 1) & (t < p["end_s"] + offset - 1)
        if sel.any():
            out[p["phase"]] = float(np.median(pipe[sel]))
    return out


def h200_kernels(folder: Path) -> list[Kernel]:
    """The H200's deep-learning kernels at the clocks the driver ran them at (the median of NVML's polls)."""
    spec = lookup("h200")
    pipe = gpm_pipe(folder)
    out = []
    for op in H200_KERNELS:
        m = read_json(folder / "kernels" / f"{op}.power.json")
        clocks = (float(np.median([p["core_mhz"] for p in m["polls"]])),
                  float(np.median([p["mem_mhz"] for p in m["polls"]])))
        out.append(_kernel(spec, op, folder / "kernels" / f"{op}.ncu.csv", clocks, float(m["watts"]),
                           pipe[op] if op in TENSOR_KERNELS else 0.0))
    return out


def _weight(rest: np.ndarray, g: np.ndarray, watts: np.ndarray) -> float:
    """The weight (>= 0) minimizing sum(((w g - rest) / watts)^2)."""
    den = float(np.sum((g / watts) ** 2))
    return 0.0 if den == 0 else max(0.0, float(np.sum(g * rest / watts ** 2)) / den)


def _loko(rest: np.ndarray, g: np.ndarray, watts: np.ndarray) -> tuple[float, np.ndarray, float]:
    """The weight on all, each kernel's weight fitted without it, and the spread (max |ln| change)."""
    w = _weight(rest, g, watts)
    out = np.array([_weight(rest[np.arange(len(g)) != i], g[np.arange(len(g)) != i], watts[np.arange(len(g)) != i])
                    for i in range(len(g))])
    spread = 0.0 if w == 0 else max(abs(math.log(max(x, 1e-12) / w)) for x in out)
    return w, out, spread


def fit_pipes(h100: Path, h200: Path) -> dict[str, Any]:
    """The weights fitted and scored: what ``catalog/power_prior_pipes.json`` ships and the figures behind it.

    ``document``: the pipes document; ``kernels``: per GPU and kernel the measured watts, the
    rule's prediction before (``before``), the held-out one (``after``), the interval before and
    after (log half-widths); ``summary``: per GPU the MAPE and the kernels outside their
    interval, before and after.
    """
    rule_q = float(rule_document()["interval"])
    old_sfu = rule_document()["weights_per_tdp"][_SFU]
    a, b = h100_kernels(h100), h200_kernels(h200)
    wa = np.array([k.watts for k in a])
    sa = np.array([k.sfu_w for k in a])
    w_sfu, sfu_out, sfu_spread = _loko(wa - np.array([k.base_w for k in a]), sa, wa)
    # One GPU's weight is taken to be off on another GPU at least as much as the rule is.
    sfu_spread = max(sfu_spread, rule_q) if w_sfu > 0 else 0.0
    tk = [k for k in b if k.tensor_w > 0]
    wt = np.array([k.watts for k in tk])
    rest = wt - np.array([k.base_w + w_sfu * k.sfu_w for k in tk])
    w_t, t_out, t_spread = _loko(rest, np.array([k.tensor_w for k in tk]), wt)
    t_spread = max(t_spread, rule_q) if w_t > 0 else 0.0
    held = {k.name: x for k, x in zip(tk, t_out)}
    kernels: dict[str, dict[str, dict[str, float]]] = {"h100-sxm": {}, "h200": {}}
    for i, k in enumerate(a + b):
        sfu = sfu_out[i] if i < len(a) else w_sfu
        tensor = held.get(k.name, 0.0) if k.gpu == "h200" else 0.0
        after = k.base_w + sfu * k.sfu_w + tensor * k.tensor_w
        share_s, share_t = w_sfu * k.sfu_w / after, w_t * k.tensor_w / after
        q = math.hypot(rule_q, share_widening(sfu_spread, share_s), share_widening(t_spread, share_t))
        kernels[k.gpu][k.name] = {"watts": k.watts, "before": k.base_w + old_sfu * k.sfu_w, "after": after,
                                  "interval_before": rule_q, "interval_after": q}
    summary = {}
    for gpu, ks in kernels.items():
        summary[gpu] = {f"{when}_{what}": f(ks, when) for when in ("before", "after")
                        for what, f in (("mape", _mape), ("outside", _outside))}
    doc = {"kind": PIPES_KIND, "version": PIPES_VERSION, "from_compute_capability": 7.0,
           "sfu_per_tdp": w_sfu, "sfu_spread": sfu_spread,
           "tensor_per_tdp": w_t, "tensor_spread": t_spread,
           "fitted_on": {"SFU": f"{h100.name}: {len(a)} kernels",
                         "Tensor": f"{h200.name}: {', '.join(k.name for k in tk)} (GPM busiest-pipe activity)"}}
    return {"document": doc, "kernels": kernels, "summary": summary}


def _mape(ks: dict[str, dict[str, float]], when: str) -> float:
    return float(np.mean([100 * abs(k[when] / k["watts"] - 1) for k in ks.values()]))


def _outside(ks: dict[str, dict[str, float]], when: str) -> list[str]:
    return [n for n, k in ks.items() if abs(math.log(k[when] / k["watts"])) > k[f"interval_{when}"]]
