"""Choosing the time model's settings by cross-validation over kernels, and the figures that hold on unseen kernels.

The protocol (docs/methodology.md): every structural choice, extension and
hyper-parameter of the time model is a *candidate* (:data:`CANDIDATES`). A candidate is scored
on each kernel by its calibrated MAPE over that kernel's measured grid. For each kernel in
turn, the candidate with the least aggregate score over the kernels of all *other*
applications, of every file, is chosen and the kernel is scored with it: nested
leave-one-application-out (:func:`application_groups`: the same application measured in two
files, or its kernels named apart, is held out whole, since an unseen kernel brings none of
them along). How the scores are aggregated (:data:`AGGREGATES`: their mean, or one that
weighs less the few kernels no candidate fits) is chosen the same way, one level further in
(:func:`protocol_choice`). Those scores are the headline figures; a figure of the candidate
chosen on all kernels, scored on the same kernels, is in-sample and comes second. The
candidate chosen on all kernels is the default. Selection regret is scored the same way:
each held-out application's time comes from the candidate chosen without it, its power from
a model fitted without its kernels.
`constant_sensitivity` re-runs the whole protocol with one hardware constant of the device
scaled: how the figures move when a constant moves; the cluster-bootstrap intervals
(`gpudvfs.stats`) say how far they could move with other kernels of the same kinds.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace

import numpy as np

from gpudvfs.catalog import DeviceSpec
from gpudvfs.data.datasets import MeasurementGrid
from gpudvfs.errors import InputError
from gpudvfs.evaluation.interval_cv import interval_cv
from gpudvfs.evaluation.nested import AGGREGATES, application_groups, nested_choice, protocol_choice, protocol_least
from gpudvfs.evaluation.regret import MeanMax, RegretTable, near_ties_by_tolerance, regret_table, single_pair_indices
from gpudvfs.evaluation.time_candidates import (
    CANDIDATES,
    EXTENSIONS,
    OVERLAP_PS,
    Candidate,
    KernelCase,
    error_matrix,
    kernel_cases,
    two_term_errors,
)
from gpudvfs.evaluation.time_cv_report import (
    ConstantVariant,
    CriterionChosen,
    ExtensionScore,
    FileScore,
    Hindsight,
    KernelScore,
    OtherFiles,
    OverlapRegret,
    RegretBaselines,
    TimeCVRegret,
    TimeCVReport,
)
from gpudvfs.evaluation.time_errors import core_share, two_term
from gpudvfs.limits import is_finite_number
from gpudvfs.policy.policies import highest_index
from gpudvfs.stats import mape, paired_intervals
from gpudvfs.time.device import TimeDevice
from gpudvfs.time.interval import log_distance

#: Ridge strengths of the learned correction tried (on standardized features).
CORRECTION_RIDGES = (0.1, 1.0, 10.0)
#: Device constants `constant_sensitivity` scales: hardware figures from microbenchmarks and
#: papers (rust/src/time/mod.rs), none fitted on the grids: a dependent instruction's latency,
#: shared-memory and L2 latency, an L2 transaction's service time, the core-clock part of the
#: DRAM latency, a warp's FP64 instruction and its special-function instruction.
DEVICE_CONSTANTS = ("inst_lat", "sh_lat", "l2_lat", "l2_del", "dm_lat_b", "dp_inst_cycle", "sf_inst_cycle")
CONSTANT_SCALES = (0.5, 0.75, 1.25, 1.5)
#: What the protocol holds out together: an application's kernels (the default), or each kernel.
HOLD_OUTS = ("application", "kernel")


def _by_file(cases: list[KernelCase], grids: list[MeasurementGrid]) -> dict[str, np.ndarray]:
    """Per grid, the mask of its kernels among ``cases``."""
    return {g.path: np.array([k.file == g.path for k in cases]) for g in grids}


def _groups(names: list[str], hold_out: str) -> np.ndarray:
    """What cross-validation holds out together: an application's kernels, or each kernel."""
    if hold_out not in HOLD_OUTS:
        raise InputError(f"hold_out must be one of {HOLD_OUTS}, got {hold_out!r}")
    return application_groups(names) if hold_out == "application" else np.arange(len(names))


@dataclass(frozen=True, eq=False)
class ProtocolRun:
    """One run of the protocol over kernels (:func:`protocol_run`).

    ``groups`` labels what is held out together; ``errors`` is the calibrated MAPE
    [candidates x kernels]; ``chosen`` is each kernel's candidate chosen with its group held out
    (:func:`protocol_choice`), by the aggregate in ``aggregates``; ``cv`` is each kernel's
    cross-validated MAPE.
    """

    cases: list[KernelCase]
    groups: np.ndarray
    errors: np.ndarray
    chosen: np.ndarray
    aggregates: list[str]
    cv: np.ndarray


def protocol_run(grids: list[MeasurementGrid], reference: tuple[float, float], device: TimeDevice,
                 candidates: Sequence[Candidate] = CANDIDATES, hold_out: str = "application") -> ProtocolRun:
    """Every candidate scored on every kernel, and the candidate chosen for each kernel without its group.

    ``grids``' kernels are pooled; ``reference`` is the (core, memory) pair whose counters profile
    each kernel; ``device`` is the base the candidates vary.

    Raises InputError for an unknown ``hold_out`` (one of `HOLD_OUTS`).
    """
    cases = kernel_cases(grids, reference, device)
    groups = _groups([k.name for k in cases], hold_out)
    errors = error_matrix(cases, candidates, device)
    chosen, used = protocol_choice(errors, groups)
    return ProtocolRun(cases, groups, errors, chosen, used, errors[chosen, np.arange(len(cases))])


def cross_validate_time(grids: list[MeasurementGrid], reference: tuple[float, float], device: TimeDevice,
                        spec: DeviceSpec | None = None, candidates: Sequence[Candidate] = CANDIDATES,
                        hold_out: str = "application", sensitivity: bool = False,
                        progress: Callable[[int, int, str], None] | None = None) -> TimeCVReport:
    """The protocol over ``grids``, their kernels pooled: the time model's settings and the figures they give.

    Per file: the cross-validated calibrated MAPE, the in-sample one of the candidate chosen
    on all kernels, the two-term baseline and how many kernels the model beats it on, and 95%
    cluster-bootstrap intervals (over the held-out groups) of the first and of its paired
    differences from the last and from the protocol with the mean as its only aggregate
    (``minus_mean``); the chosen candidates; for grids with power (given ``spec``, whose peak
    rates give the power model's utilizations), the energy regret of the minimum-energy choice,
    cross-validated and in-sample, and how both move with the soft-max exponent.
    ``aggregate_on_all`` and ``aggregate_per_kernel``: the aggregates the protocol chose
    (:func:`protocol_choice`); ``over_aggregates``: the CV MAPE per file with each aggregate
    alone, how the figures move with it.

    ``hold_out="application"`` holds out an application's kernels in every file together;
    ``"kernel"`` each kernel alone, its application's other kernels left in. ``sensitivity``
    also re-runs the protocol with each device constant scaled (:func:`constant_sensitivity`),
    calling ``progress(done, total, label)`` after each variant.

    Raises InputError for an unknown ``hold_out``.
    """
    run = protocol_run(grids, reference, device, candidates, hold_out)
    cases, groups, errors, chosen, cv = run.cases, run.groups, run.errors, run.chosen, run.cv
    best, best_aggregate = protocol_least(errors, groups)
    two = two_term_errors(cases, device, reference)
    by_file = _by_file(cases, grids)
    # With several files, also each file's kernels under the candidate chosen on the other files
    # alone: a shift of kernel set (files may share applications: not an unseen-application figure).
    other_files = ({path: protocol_least(errors[:, ~mask], groups[~mask])[0] for path, mask in by_file.items()}
                   if len(by_file) > 1 else {})
    # How the figures move with the aggregate: each one alone, not chosen.
    alone = {a: protocol_choice(errors, groups, (a,))[0] for a in AGGREGATES}
    alone_cv = {a: errors[c, np.arange(len(cases))] for a, c in alone.items()}
    # The protocol as it was, the mean alone: a baseline of the aggregate's choice.
    mean_alone = alone_cv["mean"]

    def other(path: str, mask: np.ndarray) -> OtherFiles | None:
        if path not in other_files:
            return None
        b = other_files[path]
        return OtherFiles(candidates[b].label, float(errors[b, mask].mean()), int((errors[b, mask] < two[mask]).sum()))

    files = {path: FileScore(int(mask.sum()), float(cv[mask].mean()), float(errors[best, mask].mean()),
                             float(two[mask].mean()), int((cv[mask] < two[mask]).sum()),
                             paired_intervals(cv[mask], {"two_term": two[mask], "mean": mean_alone[mask]},
                                              groups[mask]),
                             other(path, mask))
             for path, mask in by_file.items()}
    power_grids = [g for g in grids if g.watts is not None] if spec is not None else []
    return TimeCVReport(
        reference_mhz=tuple(reference), candidates=len(candidates), kernels=len(cases), hold_out=hold_out,
        applications=_shared_applications(cases, groups),
        extensions=_extensions(candidates, errors, by_file, groups),
        learned_correction=_learned_correction(cases, groups, candidates, chosen, device, reference, by_file),
        chosen_on_all=candidates[best].label,
        chosen_per_kernel={label: int(n) for label, n in zip(
            *np.unique([candidates[c].label for c in chosen], return_counts=True))},
        aggregate_on_all=best_aggregate,
        aggregate_per_kernel={a: run.aggregates.count(a) for a in AGGREGATES if a in run.aggregates},
        over_aggregates={a: {path: float(e[m].mean()) for path, m in by_file.items()} for a, e in alone_cv.items()},
        files=files,
        per_kernel={k.name: KernelScore(k.file, float(cv[j]), float(errors[best, j]), float(two[j]),
                                        candidates[chosen[j]].label)
                    for j, k in enumerate(cases)},
        interval=_interval(cases, groups, candidates, chosen, device, reference),
        selection={g.path: _selection(g, reference, device, spec, run, candidates, best, alone,
                                      other_files.get(g.path))
                   for g in power_grids} if spec is not None and power_grids else None,
        over_device_constants=constant_sensitivity(grids, reference, device, spec, candidates=candidates,
                                                   hold_out=hold_out, progress=progress) if sensitivity else None)


def _interval(cases: list[KernelCase], groups: np.ndarray, candidates: Sequence[Candidate], chosen: np.ndarray,
              device: TimeDevice, reference: tuple[float, float]) -> dict:
    """`gpudvfs.evaluation.interval_cv.interval_cv` on the cross-validated predictions' residuals."""
    residuals, distances = [], []
    for j, k in enumerate(cases):
        t = candidates[chosen[j]].model(device).predict(k.profile, k.core_mhz, k.mem_mhz, calibrate=True)
        residuals.append(np.log(t / k.time_ms))
        distances.append(log_distance(np.column_stack([k.core_mhz, k.mem_mhz]), reference))
    return interval_cv(residuals, distances, groups)


def _labels(cases: list[KernelCase], groups: np.ndarray) -> dict[str, int]:
    """Kernel name -> its application's group label."""
    return {k.name: int(g) for k, g in zip(cases, groups)}


def _shared_applications(cases: list[KernelCase], groups: np.ndarray) -> dict[str, list[str]]:
    """The applications with more than one kernel among the cases, by their shortest name: held out together."""
    out = {}
    for g in np.unique(groups):
        names = [k.name for k, h in zip(cases, groups) if h == g]
        if len(names) > 1:
            out[min(names, key=len)] = names
    return out


def _extensions(candidates: Sequence[Candidate], errors: np.ndarray, by_file: dict[str, np.ndarray],
                groups: np.ndarray) -> dict[str, ExtensionScore]:
    """What each extension does under the protocol: the CV MAPE per file with the candidates with it, and without."""

    def restricted(on: Callable[[Candidate], bool], state: bool) -> dict[str, float]:
        keep = np.array([on(c) == state for c in candidates])
        sub = errors[keep]
        cv = sub[protocol_choice(sub, groups)[0], np.arange(sub.shape[1])]
        return {path: float(cv[m].mean()) for path, m in by_file.items()}

    return {name: ExtensionScore(restricted(on, True), restricted(on, False)) for name, on in EXTENSIONS.items()}


def _kernel_features(k: KernelCase, device: TimeDevice, reference: tuple[float, float]) -> np.ndarray:
    """Counter ratios a correction may lean on.

    The core share of the two-term split, the DRAM transfers' share of the reference time,
    the occupancy and the L2 hit rate.
    """
    p = k.profile
    dram = device.dram_busy_ms(p.dram_transactions, reference[1])
    return np.array([core_share(p, device, reference), dram / p.reference_time_ms,
                     p.active_warps / device.max_warps_per_sm, p.l2_hit_rate])


def _interactions(phi: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Rows phi(f) (x) x: each log clock ratio times each kernel feature."""
    return np.einsum("ni,j->nij", phi, x).reshape(len(phi), -1)


def _learned_correction(cases: list[KernelCase], groups: np.ndarray, candidates: Sequence[Candidate],
                        chosen: np.ndarray, device: TimeDevice, reference: tuple[float, float],
                        by_file: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    """A hybrid of the model and the data, scored like the rest: the CV MAPE per file for each ridge strength.

    Each prediction times exp(phi(f) . B x), where x are a kernel's standardized counter
    ratios (and 1), phi(f) the log clock ratios to the reference, and B a ridge fit of the
    other applications' log residuals: for each kernel, B fitted without its application on
    the candidate chosen without it.
    """
    feats = np.array([_kernel_features(k, device, reference) for k in cases])
    # phi(f) per kernel; predictions per (candidate, kernel), made once across held-out kernels.
    designs = [np.column_stack([np.log(k.core_mhz / reference[0]), np.log(k.mem_mhz / reference[1])])
               for k in cases]
    preds: dict[tuple[int, int], np.ndarray] = {}
    out = {}
    for lam in CORRECTION_RIDGES:
        cv = np.empty(len(cases))
        for h in range(len(cases)):
            model = candidates[chosen[h]].model(device)
            train = [j for j in range(len(cases)) if groups[j] != groups[h]]
            mu, sd = feats[train].mean(axis=0), feats[train].std(axis=0) + 1e-12
            x = np.column_stack([np.ones(len(cases)), (feats - mu) / sd])
            rows, targets = [], []
            for j in range(len(cases)):
                key = (chosen[h], j)
                if key not in preds:
                    k = cases[j]
                    preds[key] = model.predict(k.profile, k.core_mhz, k.mem_mhz, calibrate=True)
                if groups[j] != groups[h]:
                    rows.append(_interactions(designs[j], x[j]))
                    targets.append(np.log(cases[j].time_ms / preds[key]))
            a, b = np.vstack(rows), np.concatenate(targets)
            coef = np.linalg.solve(a.T @ a + lam * np.eye(a.shape[1]), a.T @ b)
            corr = _interactions(designs[h], x[h]) @ coef
            cv[h] = mape(preds[(chosen[h], h)] * np.exp(corr), cases[h].time_ms)
        out[f"{lam:g}"] = {path: float(cv[m].mean()) for path, m in by_file.items()}
    return out


def _selection(grid: MeasurementGrid, reference: tuple[float, float], device: TimeDevice, spec: DeviceSpec,
               run: ProtocolRun, candidates: Sequence[Candidate], best: int, alone: dict[str, np.ndarray],
               other_files: int | None = None) -> TimeCVRegret:
    """Energy regret of the minimum-energy choice on a grid with power, each application's time from the protocol.

    Each application's time from the candidate chosen without it (cross-validated), on all
    kernels, or (index ``other_files``) on the other files' kernels alone; with the candidate chosen by the
    regret itself instead of the time error (the least mean regret over the other
    applications: ``chosen_by_regret``), and with that criterion or the time error itself
    chosen for each application on the others (``criterion_chosen``, :func:`_criterion_chosen`);
    and over the soft-max exponents, the rest of the chosen-on-all candidate kept; and with
    the near-ties rule (``near_ties``: the pair nearest the highest clocks within a tolerance
    of the predicted minimum energy), its tolerance chosen on the other applications; and with
    each aggregate alone choosing the time settings (``alone``: candidate per kernel);
    ``hindsight``: the least regret any candidate gives each application, and that of the one
    candidate best on all (what no choice among the candidates beats). An
    application's power comes from a model fitted without its group, as its time does.
    ``baselines``: the regret with two-term times, of one pair for all chosen on the other
    applications' groups, and of the highest clocks; ``intervals``: 95% cluster-bootstrap
    intervals (over the application groups) of the cross-validated mean (``mean``) and of its
    paired differences from the first two baselines and from the regret with the mean as the
    protocol's only aggregate (``minus_mean``).
    """
    cases, groups, errors, chosen = run.cases, run.groups, run.errors, run.chosen
    table = regret_table(grid, reference, device, spec, groups=_labels(cases, groups))

    def regrets(candidate: Candidate) -> np.ndarray:
        """Each application's regret with every kernel's time from ``candidate``."""
        return _regrets(table, grid.path, cases, device, lambda j: candidate)

    # Every candidate's regret per application [candidates x applications]: the cross-validated,
    # in-sample and other-files figures are rows of it.
    every = np.array([regrets(c) for c in candidates])
    apps = np.arange(every.shape[1])
    case_of = _case_index(cases, grid.path)

    def regret_under(per_kernel: np.ndarray) -> np.ndarray:
        """Each application's regret under a candidate chosen per kernel (``per_kernel``)."""
        return every[[per_kernel[case_of[n]] for n in table.names], apps]

    cv = regret_under(chosen)
    alone_regret = {a: regret_under(c) for a, c in alone.items()}
    in_sample = every[best]
    app_groups = np.array([groups[case_of[n]] for n in table.names])
    by_regret = every[nested_choice(every, app_groups), apps]
    by_criterion, regret_picked = _criterion_chosen(errors, groups, every, app_groups)
    # The near-ties rule on the cross-validated times, its tolerance chosen without the
    # application's group (backprop's two kernels held out together, as for its time).
    t_cv = _times(table, grid.path, cases, device, lambda j: candidates[chosen[j]])
    hi = highest_index(table.configs)
    near_ties = near_ties_by_tolerance(table, t_cv, hi, groups=app_groups)
    t_two = np.vstack([two_term(cases[case_of[n]].profile, device, reference, table.configs[:, 0],
                                table.configs[:, 1]) for n in table.names])
    at_pairs = table.regret_at_every_pair
    baselines = {"two_term": table.regrets(t_two),
                 "single_pair": at_pairs[apps, single_pair_indices(at_pairs, groups=app_groups)[1]],
                 "highest_clocks": at_pairs[:, hi]}
    sensitivity = {}
    for p in OVERLAP_PS:
        r = regrets(replace(candidates[best], overlap_p=p))
        sensitivity[f"{p:g}"] = OverlapRegret(float(r.mean()), float(r.max()))
    by_other_files = None if other_files is None else every[other_files]
    return TimeCVRegret(
        cv_regret_mean=float(cv.mean()), cv_regret_max=float(cv.max()),
        in_sample_regret_mean=float(in_sample.mean()), in_sample_regret_max=float(in_sample.max()),
        chosen_by_regret=MeanMax.of(by_regret),
        criterion_chosen=CriterionChosen.of(by_criterion, regret_chosen=int(regret_picked.sum())),
        near_ties=near_ties.cross_validated,
        baselines=RegretBaselines(**{k: MeanMax.of(r) for k, r in baselines.items()}),
        intervals=paired_intervals(cv, {**{k: baselines[k] for k in ("two_term", "single_pair")},
                                        "mean": alone_regret["mean"]},
                                   app_groups),
        per_app={n: float(r) for n, r in zip(table.names, cv)},
        over_aggregates={a: MeanMax.of(r) for a, r in alone_regret.items()},
        # What no choice among the candidates beats: each application's best in hindsight,
        # and the best single candidate in hindsight.
        hindsight=Hindsight(MeanMax.of(every.min(axis=0)), MeanMax.of(every[int(np.argmin(every.mean(axis=1)))])),
        over_overlap_p=sensitivity,
        other_files_regret_mean=None if by_other_files is None else float(by_other_files.mean()),
        other_files_regret_max=None if by_other_files is None else float(by_other_files.max()))


def _criterion_chosen(errors: np.ndarray, groups: np.ndarray, every: np.ndarray, app_groups: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Per application, its regret when the criterion that chooses the time settings is itself chosen on the others.

    The applications are the columns of ``every`` (regret [candidates x applications]). The
    criterion is the time error over the kernels (``errors``, [candidates x kernels],
    aggregated as :func:`protocol_least` does) or the mean regret over the applications: the
    one whose settings, chosen without each other application in turn, gave that application
    the lower mean regret (the time error on a tie). Returns the regrets and where the regret
    criterion was picked.
    """
    @functools.cache
    def chosen(criterion: str, left_out: frozenset) -> int:
        if criterion == "time":
            keep = ~np.isin(groups, list(left_out))
            return protocol_least(errors[:, keep], groups[keep])[0]
        return int(np.argmin(every[:, ~np.isin(app_groups, list(left_out))].mean(axis=1)))

    out, picked = np.empty(len(app_groups)), np.zeros(len(app_groups), dtype=bool)
    for a, ga in enumerate(app_groups):
        others = [b for b in range(len(app_groups)) if app_groups[b] != ga]
        inner = {c: np.mean([every[chosen(c, frozenset((ga, app_groups[b]))), b] for b in others])
                 for c in ("time", "regret")}
        picked[a] = inner["regret"] < inner["time"]
        out[a] = every[chosen("regret" if picked[a] else "time", frozenset((ga,))), a]
    return out, picked


def _times(table: RegretTable, path: str, cases: list[KernelCase], device: TimeDevice,
           candidate_of: Callable[[int], Candidate]) -> np.ndarray:
    """Calibrated time of each application of ``table`` (of the grid at ``path``) at every pair.

    [applications x pairs], from ``candidate_of(j)`` on ``device``, j its index among ``cases``;
    the applications of one candidate in one batch.
    """
    index = _case_index(cases, path)
    js = [index[n] for n in table.names]
    rows_of: dict[Candidate, list[int]] = {}
    for row, j in enumerate(js):
        rows_of.setdefault(candidate_of(j), []).append(row)
    out = np.empty((len(js), len(table.configs)))
    for candidate, rows in rows_of.items():
        out[rows] = candidate.model(device).predict([cases[js[r]].profile for r in rows], table.configs[:, 0],
                                                    table.configs[:, 1], calibrate=True)
    return out


def _case_index(cases: list[KernelCase], path: str) -> dict[str, int]:
    """Each kernel of the grid at ``path`` by name: its index among ``cases``."""
    return {k.name: j for j, k in enumerate(cases) if k.file == path}


def _regrets(table: RegretTable, path: str, cases: list[KernelCase], device: TimeDevice,
             candidate_of: Callable[[int], Candidate]) -> np.ndarray:
    """Minimum-energy regret per application of ``table``, each one's time as :func:`_times` gives it."""
    return table.regrets(_times(table, path, cases, device, candidate_of))


def constant_sensitivity(grids: list[MeasurementGrid], reference: tuple[float, float], device: TimeDevice,
                         spec: DeviceSpec | None = None, constants: Sequence[str] = DEVICE_CONSTANTS,
                         scales: Sequence[float] = CONSTANT_SCALES, candidates: Sequence[Candidate] = CANDIDATES,
                         hold_out: str = "application", progress: Callable[[int, int, str], None] | None = None
                         ) -> dict[str, dict[str, ConstantVariant]]:
    """How the protocol's cross-validated figures move when one device constant moves.

    For each numeric `TimeDevice` field in ``constants`` and each scale, the whole protocol is
    re-run (every candidate, nested leave-one-application-out) on ``device`` with that constant
    times the scale. ``spec``, ``hold_out`` and ``progress`` are as in `cross_validate_time`.

    Returns
    -------
    dict
        Constant -> scale (as ``f"{x:g}"``) -> its `ConstantVariant`: the CV MAPE per file and,
        for grids with power, the CV regret's mean and max.

    Raises InputError for a constant that is not a numeric field of the device, or a scale not finite
    and positive.
    """
    # The soft-max exponent is not a device constant here: every candidate sets its own.
    numeric = {f.name for f in fields(TimeDevice) if f.type in ("float", float)} - {"overlap_p"}
    unknown = [c for c in constants if c not in numeric]
    if unknown or not constants:
        raise InputError(f"constants must be numeric TimeDevice fields ({sorted(numeric)}), got {list(constants)}")
    if not scales or not all(is_finite_number(x) and x > 0 for x in scales):
        raise InputError(f"scales must be finite numbers > 0, got {list(scales)}")
    tables: dict[str, RegretTable] = {}
    if spec is not None:
        cases = kernel_cases(grids, reference, device)
        labels = _labels(cases, _groups([k.name for k in cases], hold_out))
        tables = {g.path: regret_table(g, reference, device, spec, groups=labels) for g in grids if g.watts is not None}
    out: dict[str, dict[str, ConstantVariant]] = {}
    total, done = len(constants) * len(scales), 0
    for name in constants:
        out[name] = {}
        for x in scales:
            dev = replace(device, **{name: getattr(device, name) * x})
            run = protocol_run(grids, reference, dev, candidates, hold_out)

            def candidate_of(j: int, chosen: np.ndarray = run.chosen) -> Candidate:
                return candidates[chosen[j]]

            regret = {path: MeanMax.of(_regrets(table, path, run.cases, dev, candidate_of))
                      for path, table in tables.items()}
            out[name][f"{x:g}"] = ConstantVariant(
                {path: float(run.cv[m].mean()) for path, m in _by_file(run.cases, grids).items()}, regret or None)
            done += 1
            if progress is not None:
                progress(done, total, f"{name} x{x:g}")
    return out
