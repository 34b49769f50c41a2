"""The prior's core voltage curve: its floor and knee, chosen on the GPUs with a measured clock sweep.

The rule's own curve (:mod:`gpudvfs.power.prior_rule`) comes out of a pooled power fit mostly
of Maxwell and Pascal microbenchmarks: nearly flat (0.95 of the default voltage at the lowest
clocks, the knee at 0.91 of the default clock), so on an A40 the prior's least-energy clock
cost 7.1% more energy than the measured best. The curve shipped in
``catalog/power_prior_curve.json`` is flat at ``floor`` (a fraction of the default clock's
voltage) below ``knee`` (a fraction of the default clock) and linear above; it is chosen by
the energy its least-energy clocks cost on each GPU's sweep, each GPU left out
(:mod:`gpudvfs.power.prior_curve_fit`). It serves from Ampere on (``from_compute_capability``):
the older GPUs' sweeps are within 4.2% on the rule's own curve, fitted mostly on their kind.
"""

from __future__ import annotations

import math
from typing import Any

from gpudvfs.catalog import DeviceSpec
from gpudvfs.catalog.shipped import shipped_json
from gpudvfs.errors import InputError
from gpudvfs.power.prior import rule_document

CURVE_KIND = "power-prior-curve"
CURVE_VERSION = 1


def curve_document() -> dict[str, Any]:
    """The shipped curve (``catalog/power_prior_curve.json``), checked."""
    return check_curve(*shipped_json("power_prior_curve.json"))


def check_curve(doc: Any, where: str) -> dict[str, Any]:
    """``doc`` itself if it is a curve document of this version, its knee and floor in (0, 1].

    Otherwise an `InputError` says what ``where`` lacks.
    """
    if not isinstance(doc, dict) or doc.get("kind") != CURVE_KIND or doc.get("version") != CURVE_VERSION:
        raise InputError(f"{where}: not a gpudvfs {CURVE_KIND} file of version {CURVE_VERSION}")
    for key in ("knee", "floor"):
        v = doc.get(key)
        if not (isinstance(v, (int, float)) and _number(v) and 0 < v <= 1):
            raise InputError(f"{where}: {key} must be a number in (0, 1], got {v!r}")
    if not (_number(doc.get("from_compute_capability")) and doc["from_compute_capability"] > 0):
        raise InputError(f"{where}: from_compute_capability must be a compute capability such as 8.0")
    return doc


def _number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def core_curve(knee: float, floor: float) -> list[float]:
    """The curve as a `curve`-variant model's [break, slope]: ``floor`` below ``knee``, 1 at the default clock."""
    return [knee, (1 - floor) / (1 - knee) if knee < 1 else 0.0]


def shipped_curves(spec: DeviceSpec) -> list[list[float] | None]:
    """Per domain, the prior's curves of ``spec``: the shipped core curve where it serves, else the rule's."""
    doc, rule = curve_document(), rule_document()
    if float(spec.compute_capability) < doc["from_compute_capability"]:
        return list(rule["curves"])
    return [core_curve(doc["knee"], doc["floor"]), rule["curves"][1]]
