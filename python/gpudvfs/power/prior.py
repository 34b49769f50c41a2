"""The power prior: a power model of any catalog GPU from its public figures alone.

One rule for every GPU (`power_prior.json` beside the catalog, fitted by
:mod:`gpudvfs.power.prior_rule` on the measured GPUs of the public data): the model of
Guerreiro et al. in units of the GPU's TDP and of its default clocks. Static, idle and
per-component dynamic power are fractions of the TDP at the default clocks; the core
voltage is the `curve` variant's flat-then-linear curve over the core clock as a fraction
of the default one. So a GPU's prior is the rule scaled by its TDP and placed at its
default clocks: no measurement of it. ``interval_`` is the half-width of the rule's 90%
interval in log space (a prediction P lies in [P e^-q, P e^q]), from its errors on GPUs it
was not fitted on.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from gpudvfs.catalog import DeviceSpec
from gpudvfs.catalog.clocks import SupportedClocks
from gpudvfs.catalog.shipped import shipped_json
from gpudvfs.data.counters import COMPONENTS, DOMAIN_SIZES
from gpudvfs.errors import InputError

RULE_KIND = "power-prior-rule"
RULE_VERSION = 1


def rule_document() -> dict[str, Any]:
    """The rule shipped with the package (``catalog/power_prior.json``), checked."""
    return check_rule(*shipped_json("power_prior.json"))


def check_rule(doc: Any, where: str) -> dict[str, Any]:
    """``doc`` itself if it is a power-prior rule of this version over :data:`COMPONENTS`.

    An `InputError` names ``where`` otherwise.
    """
    if not isinstance(doc, dict) or doc.get("kind") != RULE_KIND or doc.get("version") != RULE_VERSION:
        raise InputError(f"{where}: not a gpudvfs {RULE_KIND} file of version {RULE_VERSION}")
    sizes = doc.get("domain_sizes")
    if doc.get("components") != list(COMPONENTS) or sizes != list(DOMAIN_SIZES):
        raise InputError(f"{where}: a prior rule covers the components {list(COMPONENTS)} in domains "
                         f"{list(DOMAIN_SIZES)}")
    for key, n in (("static_per_tdp", 2), ("idle_per_tdp", 2), ("weights_per_tdp", len(COMPONENTS))):
        v = doc.get(key)
        if not (isinstance(v, list) and len(v) == n and all(_nonneg(x) for x in v)):
            raise InputError(f"{where}: {key} must list {n} finite numbers >= 0")
    curves = doc.get("curves")
    if not (isinstance(curves, list) and len(curves) == 2
            and all(c is None or (isinstance(c, list) and len(c) == 2 and all(_nonneg(x) for x in c))
                    for c in curves)):
        raise InputError(f"{where}: curves must hold, per domain, null (flat) or [break, slope] >= 0")
    if not _nonneg(doc.get("interval")):
        raise InputError(f"{where}: interval must be a finite log half-width >= 0")
    return doc


def _nonneg(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0


def prior_state(spec: DeviceSpec, rule: dict[str, Any] | None = None, configs: ArrayLike | None = None,
                reference: Sequence[float] | None = None,
                curves: Sequence[Sequence[float] | None] | None = None) -> dict[str, Any]:
    """A `curve`-variant power model's state for a catalog GPU: the rule scaled by its TDP.

    Laid out on ``configs`` [K x 2] MHz (the GPU's supported pairs by default), for utilizations
    measured at ``reference`` (the default clocks by default); ``curves`` are per domain voltage
    curves in place of the rule's (`gpudvfs.power.prior_curve`).
    """
    rule = rule_document() if rule is None else rule
    at = spec.default_mhz if reference is None else reference
    ref = (float(at[0]), float(at[1]))
    tdp = float(spec.tdp_w)
    return curve_state(
        ref, [tdp * x for x in rule["static_per_tdp"]], [tdp * x for x in rule["idle_per_tdp"]],
        [tdp * x for x in rule["weights_per_tdp"]], DOMAIN_SIZES, rule["curves"] if curves is None else curves,
        SupportedClocks.of_spec(spec).pairs if configs is None else configs,
        [f"prior: the catalog rule scaled by {spec.key}'s {tdp:g} W TDP at its default clocks {ref[0]:g}/{ref[1]:g} "
         f"MHz; not fitted on this GPU (90% interval x/{math.exp(rule['interval']):.2f})"])


def curve_state(ref: Sequence[float], static: Sequence[float], idle: Sequence[float], weights: Sequence[float],
                domain_sizes: Sequence[int], curves: Sequence[Sequence[float] | None], configs: ArrayLike,
                notes: list[str]) -> dict[str, Any]:
    """The state of a `curve`-variant power model (for ``_core.PowerFit.from_state``).

    ``static`` and ``idle`` are per domain, ``weights`` per component, all in W at ``ref`` (core,
    memory MHz); ``curves`` per domain None (flat) or [break, slope] over the clock as a
    fraction of ``ref``; ``configs`` [K x 2] MHz.
    """
    cfg = np.asarray(configs, dtype=np.float64)
    # A flat domain: slope 0 (its break then plays no part, and JSON has no infinity).
    full = [[1.0, 0.0] if c is None else [float(c[0]), float(c[1])] for c in curves]

    def volts(d: int, mhz: ArrayLike) -> np.ndarray:
        xb, s = full[d]
        x = np.asarray(mhz, dtype=np.float64) / ref[d]
        return 1.0 + s * (np.maximum(0.0, x - xb) - max(0.0, 1.0 - xb)) if s > 0 else np.ones_like(x)

    levels = [sorted({float(c) for c in cfg[:, d]}) for d in (0, 1)]
    return {
        "variant": "curve", "ref_mhz": [float(r) for r in ref], "domain_sizes": list(domain_sizes),
        "static_coef": [float(x) for x in static], "idle_coef": [float(x) for x in idle],
        "weights": [float(x) for x in weights], "configs": cfg.tolist(),
        "voltages": np.column_stack([volts(0, cfg[:, 0]), volts(1, cfg[:, 1])]).ravel().tolist(),
        "on_bound": [False] * (2 * len(cfg)), "levels_mhz": levels,
        "level_voltages": [volts(d, levels[d]).tolist() for d in (0, 1)], "curves": full,
        "folded": [False, False], "iterations": 0, "converged": True, "sse": 0.0, "objective": 0.0,
        "train_mape": 0.0, "notes": list(notes),
    }
