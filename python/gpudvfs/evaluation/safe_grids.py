"""The safe choice stressed by leaving out whole GPUs: its rule chosen on the other GPUs' grids.

A rule (`gpudvfs.evaluation.safe`) is an anchor (one pair for all, or the reference clocks), a
cap on how far from the anchor the choice may move (log distance, `CAPS`) and the spreads ``z``
the predicted gain must exceed (`gpudvfs.evaluation.safe.Z_GRID`). Every workload of a grid is
scored under every rule, its anchor and spread fitted on the grid's other workloads. For each
GPU left out, the rule is chosen on the other GPUs' grids (`choose_rule`) and scored on its own.

The choice aims at the target: on every grid a mean regret within one point of one pair for
all, and a maximum of at most `MAX_REGRET`. A rule's score on some grids is the mean over them
of its mean regret plus its maximum's excess over `MAX_REGRET`; the rule chosen is the most
cautious (`rules`' order) whose score is within `SLACK` of the least: where the grids cannot
tell rules apart, the choice falls back rather than trusts.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpudvfs.data import read_measured_grid
from gpudvfs.data.dcgm_fields import is_dcgm_grid
from gpudvfs.errors import InputError
from gpudvfs.evaluation.plain import plain_table
from gpudvfs.evaluation.regret import MeanMax
from gpudvfs.evaluation.replay_table import ReplayTable, dcgm_replay_table, replay_table
from gpudvfs.evaluation.safe import ANCHORS, Z_GRID, candidate_regrets, rule_name
from gpudvfs.records import Record
from gpudvfs.time.device import TimeDevice

#: How far (log distance) the choice may move from its anchor; inf: anywhere.
CAPS = (0.05, 0.1, 0.2, 0.3, 0.5, np.inf)
#: The target's bound on any workload's regret.
MAX_REGRET = 0.20
#: The target's allowance over one pair for all's mean regret.
OVER_SINGLE_PAIR = 0.01
#: How far over the least score a more cautious rule may be chosen: the target's one point.
SLACK = 0.01
#: The slacks the report moves `SLACK` over.
SLACKS = (0.0, 0.005, 0.01, 0.02)

#: The grids of the public data scored (path under the data folder, GPU, catalog device, reference
#: pair). A grid without a device is read without counters: each workload predicted from the
#: others' curves, placed on its time and power at the highest setting (`gpudvfs.evaluation.plain`).
SHARED_GRIDS: tuple[tuple[str, str, str | None, tuple[float, float] | None], ...] = (
    ("nv-dvfs-benchmark/gtx980_time_power_dev.csv", "GTX 980", "gtx980", (700.0, 700.0)),
    ("nsfcac/v100_spec_dev.csv", "V100", "v100-pcie", (1245.0, 877.0)),
    ("gpuptxmodel/titanx_microbenchmarks.csv", "GTX Titan X", None, None),
    ("gpuptxmodel/titanx_realbenchmarks.csv", "GTX Titan X", None, None),
    ("perseus/bloom_a40_stages.csv", "A40", None, None),
    ("perseus/gpt3-175b_a40_stages.csv", "A40", None, None),
)


def rules() -> list[tuple[str, float, float]]:
    """Every (anchor, cap, z), the most cautious first: one pair for all before the reference, larger z, smaller cap.

    ``z = inf`` (the anchor always) takes no cap.
    """
    return [(a, cap, z) for a in ANCHORS for z in sorted(Z_GRID, reverse=True)
            for cap in (CAPS if np.isfinite(z) else (np.inf,))]


@dataclass(frozen=True, eq=False)
class GridRegrets:
    """One grid's regret per workload under every rule (`rule_name` -> [A]).

    ``least_fixed_max``: the least maximum regret of any one pair for all, in hindsight: what no
    rule that cannot tell the workloads apart gets under.
    """

    name: str
    gpu: str
    by_rule: dict[str, np.ndarray]
    least_fixed_max: float

    def at(self, anchor: str, cap: float = np.inf, z: float = np.inf) -> np.ndarray:
        """The regret under one rule (by default the anchor always; ``z = 0``, no cap: the plain choice)."""
        return self.by_rule[rule_name(anchor, cap, z)]


def grid_regrets(name: str, gpu: str, table: ReplayTable, reference_index: int) -> GridRegrets:
    """Each workload's energy regret under every rule (`rules`) on a replay table.

    The predictions are the table's, each made without the workload.
    """
    e, predicted = table.time_ms * table.watts, table.time_pred * table.watts_pred
    regret = e / e.min(axis=1, keepdims=True) - 1.0
    return GridRegrets(name, gpu, candidate_regrets(regret, np.log(predicted), np.log(e), table.configs,
                                                    reference_index, rules()), float(regret.max(axis=0).min()))


def shared_grids(data: Path) -> list[GridRegrets]:
    """The grids of `SHARED_GRIDS` found under ``data``, read as ``--skip-invalid`` reads them.

    Raises InputError where fewer than two GPUs' grids are found.
    """
    out = []
    for path, gpu, device, reference in SHARED_GRIDS:
        if not (data / path).exists():
            continue
        with warnings.catch_warnings():  # rows the reader flags are left out, as --skip-invalid leaves them
            warnings.simplefilter("ignore")
            grid = read_measured_grid(data / path, "the safe choice left out by GPU", on_invalid="skip")
        if device is None or reference is None:
            table = plain_table(grid)
            ref = table.default_index
        else:
            time_device, spec = TimeDevice.resolve(device)
            if is_dcgm_grid(grid):
                table = dcgm_replay_table(grid, reference)
            else:
                assert spec is not None  # SHARED_GRIDS names catalog GPUs
                table = replay_table(grid, reference, time_device, spec)
            ref = int(np.flatnonzero((table.configs == reference).all(axis=1))[0])
        out.append(grid_regrets(path, gpu, table, ref))
    if len({g.gpu for g in out}) < 2:
        raise InputError(f"{data}: the safe choice left out by GPU needs the grids of at least two GPUs "
                         f"({', '.join(p for p, *_ in SHARED_GRIDS)}); found {len(out)}")
    return out


def _score(grid: GridRegrets, rule: str) -> float:
    r = grid.by_rule[rule]
    return float(r.mean() + max(0.0, r.max() - MAX_REGRET))


def choose_rule(grids: list[GridRegrets], slack: float = SLACK) -> str:
    """The most cautious rule whose mean score over ``grids`` is within ``slack`` of the least (module notes)."""
    names = [rule_name(*r) for r in rules()]
    score = np.array([np.mean([_score(g, n) for g in grids]) for n in names])
    return names[int(np.flatnonzero(score <= score.min() + slack + 1e-12)[0])]


@dataclass(frozen=True)
class LeftOutGrid(Record):
    """A grid's regret under the rule chosen without its GPU, beside one pair for all, the plain choice, the reference.

    ``least_fixed_max``: as `GridRegrets`'; ``meets_target``: a mean within one point of one pair
    for all's and a maximum of at most `MAX_REGRET`.
    """

    gpu: str
    workloads: int
    rule: str
    safe: MeanMax
    single_pair: MeanMax
    plain: MeanMax
    reference: MeanMax
    least_fixed_max: float
    meets_target: bool


@dataclass(frozen=True, eq=False)
class SafeGridsReport(Record):
    """The safe choice left out by GPU (:func:`leave_one_gpu_out`).

    ``left_out`` maps each grid to its `LeftOutGrid`, the rule chosen on the other GPUs' grids;
    ``rule_on_all`` is what a GPU none of them measured gets; ``over_rules`` (grid -> rule ->
    regret) and ``over_slack`` (slack -> grid -> regret left out) show how the figure moves with
    the constants; ``slack`` is the one the figures are chosen at.
    """

    left_out: dict[str, LeftOutGrid]
    rule_on_all: str
    over_rules: dict[str, dict[str, MeanMax]]
    over_slack: dict[str, dict[str, MeanMax]]
    slack: float


def _left_out(grids: list[GridRegrets], slack: float) -> dict[str, tuple[str, np.ndarray]]:
    """Per grid, the rule chosen on the other GPUs' grids and its regret there."""
    out = {}
    for g in grids:
        rule = choose_rule([h for h in grids if h.gpu != g.gpu], slack)
        out[g.name] = rule, g.by_rule[rule]
    return out


def leave_one_gpu_out(grids: list[GridRegrets], slack: float = SLACK) -> SafeGridsReport:
    """Each grid scored under the rule chosen on the other GPUs' grids.

    Raises InputError where the grids are of fewer than two GPUs.
    """
    if len({g.gpu for g in grids}) < 2:
        raise InputError("the safe choice left out by GPU needs the grids of at least two GPUs")
    chosen = _left_out(grids, slack)
    left_out = {}
    for g in grids:
        rule, safe = chosen[g.name]
        single = g.at("single_pair")
        left_out[g.name] = LeftOutGrid(
            gpu=g.gpu, workloads=len(safe), rule=rule, safe=MeanMax.of(safe), single_pair=MeanMax.of(single),
            plain=MeanMax.of(g.at("single_pair", z=0.0)), reference=MeanMax.of(g.at("reference")),
            least_fixed_max=g.least_fixed_max,
            meets_target=bool(safe.mean() <= single.mean() + OVER_SINGLE_PAIR + 1e-12 and safe.max() <= MAX_REGRET))
    return SafeGridsReport(
        left_out=left_out, rule_on_all=choose_rule(grids, slack),
        over_rules={g.name: {n: MeanMax.of(r) for n, r in g.by_rule.items()} for g in grids},
        over_slack={f"{s:g}": {n: MeanMax.of(r) for n, (_, r) in _left_out(grids, s).items()} for s in SLACKS},
        slack=slack)
