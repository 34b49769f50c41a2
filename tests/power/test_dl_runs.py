"""Every deep-learning run recorded under validation/<gpu>/ by collect_dl.sh, found by its folders'
names, so that a new GPU's or a new run's is read without a change here: each kernel's
measurement (`dl_kernels.py power`) is whole or says why it was skipped, and each observed load
paired with its kernels (observe$SUFFIX with kernels$SUFFIX; the H200's first varied load with
its kernels/) goes through the observe-then-predict chain."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from gpudvfs.evaluation.observe_chain import chain_table, read_phases

from conftest import REPO

VALIDATION = REPO / "validation"
POWER_FILES = sorted(VALIDATION.glob("*/kernels*/*.power.json"))


def _pairs() -> list[tuple[Path, Path]]:
    found = {(VALIDATION / "nvidia-h200" / "observe-varied", VALIDATION / "nvidia-h200" / "kernels")}
    for obs in VALIDATION.glob("*/observe*/load.json"):
        kernels = obs.parent.parent / obs.parent.name.replace("observe", "kernels", 1)
        if kernels.is_dir():
            found.add((obs.parent, kernels))
    return sorted(found)


PAIRS = _pairs()


@pytest.mark.parametrize("path", POWER_FILES, ids=[str(p.relative_to(VALIDATION)) for p in POWER_FILES])
def test_each_kernels_measurement_is_whole_or_says_why_it_was_skipped(path: Path):
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert doc["op"] == path.name.removesuffix(".power.json")
    if "skipped" in doc:
        assert doc["skipped"] and not (path.parent / f"{doc['op']}.ncu.csv").exists()
        return
    assert doc["launches"] > 0 and doc["time_ms"] > 0 and 0 < doc["watts"] < 2000
    assert math.isclose(doc["watts"], doc["joules"] / doc["seconds"], rel_tol=1e-9)
    assert doc["polls"] and all(p["core_mhz"] > 0 and p["mem_mhz"] > 0 for p in doc["polls"])
    for name, pct in (doc.get("gpm_pct") or {}).items():
        assert pct is None or -0.5 <= pct <= 100.5, name


@pytest.mark.parametrize(("observed", "kernels"), PAIRS, ids=[str(o.relative_to(VALIDATION)) for o, _ in PAIRS])
def test_each_observed_load_predicts_its_kernels_held_out(observed: Path, kernels: Path):
    phases = {p.name for p in read_phases(observed / "load.json")} - {"idle"}
    rows = chain_table(observed / "readings.csv", observed / "load.json", kernels)
    assert {r.kernel for r in rows} == phases
    for r in rows:
        assert r.measured_w > 0 and r.windows_left_out > 0
        assert math.isfinite(r.observed_w) and r.observed_w > 0 and math.isfinite(r.prior_w)
