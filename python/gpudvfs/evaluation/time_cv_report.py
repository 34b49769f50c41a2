"""The time protocol's report (`gpudvfs.evaluation.time_cv.cross_validate_time`) as frozen records.

Mappings keyed by data (a file's path, a kernel's name, a candidate's label, an aggregate, a
ridge strength) stay dicts; what has fixed fields is a record.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpudvfs.evaluation.regret import MeanMax, TolerancesChosen
from gpudvfs.records import Record, renamed


@dataclass(frozen=True)
class OtherFiles(Record):
    """A file's kernels under the candidate chosen on the other files alone.

    A shift of kernel set: files may share applications, so this is not an unseen-application
    figure. ``beats_two_term``: on how many kernels it beats the two-term baseline.
    """

    chosen: str
    mape: float
    beats_two_term: int


@dataclass(frozen=True)
class FileScore(Record):
    """One file's kernels under the protocol.

    Calibrated MAPE (%) cross-validated, in-sample (the candidate chosen on all kernels) and of
    the two-term baseline; ``cv_beats_two_term`` counts the kernels the cross-validated model
    beats it on. ``intervals`` holds 95% cluster-bootstrap intervals of ``cv_mape`` and of its
    paired differences from the two-term baseline and from the protocol with the mean as its
    only aggregate (`gpudvfs.stats.paired_intervals`). ``other_files``: with several files, its
    kernels under the candidate chosen on the other files.
    """

    kernels: int
    cv_mape: float
    in_sample_mape: float
    two_term_mape: float
    cv_beats_two_term: int
    intervals: dict
    other_files: OtherFiles | None = None


@dataclass(frozen=True)
class KernelScore(Record):
    """One kernel's calibrated MAPE (%): cross-validated, in-sample, two-term; the candidate chosen without it."""

    file: str
    cv_mape: float
    in_sample_mape: float
    two_term_mape: float
    chosen: str


@dataclass(frozen=True)
class ExtensionScore(Record):
    """The cross-validated MAPE per file with the candidates restricted to those with an extension, and without."""

    with_it: dict[str, float] = field(metadata=renamed("with"))
    without: dict[str, float]


@dataclass(frozen=True)
class CriterionChosen(MeanMax):
    """The regret with the criterion that chooses the time settings itself chosen on the other applications.

    ``regret_chosen``: for how many applications the regret was the criterion picked.
    """

    regret_chosen: int


@dataclass(frozen=True)
class RegretBaselines(Record):
    """The regret with two-term times, of one pair for all chosen on the other applications, of the highest clocks."""

    two_term: MeanMax
    single_pair: MeanMax
    highest_clocks: MeanMax


@dataclass(frozen=True)
class Hindsight(Record):
    """What no choice among the candidates beats: each application's best, and the best candidate for all."""

    per_application: MeanMax
    one_candidate: MeanMax


@dataclass(frozen=True)
class OverlapRegret(Record):
    """The regret with one soft-max exponent, the rest of the candidate chosen on all kernels kept."""

    regret_mean: float
    regret_max: float


@dataclass(frozen=True)
class TimeCVRegret(Record):
    """The minimum-energy regret on a grid with power, each application's time from the protocol.

    ``cv_regret_*``: each application's time from the candidate chosen without it;
    ``in_sample_regret_*``: from the candidate chosen on all kernels; ``chosen_by_regret``: the
    candidate chosen by the least mean regret over the other applications instead;
    ``criterion_chosen``: that criterion or the time error itself chosen on the other
    applications; ``near_ties``: the near-ties rule, its tolerance chosen on the other
    applications. ``intervals`` holds 95% cluster-bootstrap intervals (over the application
    groups) of the cross-validated mean and of its paired differences from the first two
    baselines and from the regret with the mean as the protocol's only aggregate
    (`gpudvfs.stats.paired_intervals`). ``over_aggregates`` and ``over_overlap_p`` give the
    regret with each aggregate alone choosing the time settings and with each soft-max exponent;
    ``other_files_regret_*`` (several files only) with the time settings chosen on the other
    files' kernels alone.
    """

    cv_regret_mean: float
    cv_regret_max: float
    in_sample_regret_mean: float
    in_sample_regret_max: float
    chosen_by_regret: MeanMax
    criterion_chosen: CriterionChosen
    near_ties: TolerancesChosen
    baselines: RegretBaselines
    intervals: dict
    per_app: dict[str, float]
    over_aggregates: dict[str, MeanMax]
    hindsight: Hindsight
    over_overlap_p: dict[str, OverlapRegret]
    other_files_regret_mean: float | None = None
    other_files_regret_max: float | None = None


@dataclass(frozen=True)
class ConstantVariant(Record):
    """The protocol re-run with one device constant scaled.

    ``cv_mape``: the cross-validated MAPE per file; ``cv_regret``: for grids with power, the
    cross-validated regret per file (None without them).
    """

    cv_mape: dict[str, float]
    cv_regret: dict[str, MeanMax] | None = None


@dataclass(frozen=True)
class TimeCVReport(Record):
    """The time protocol over grids of kernels (`gpudvfs.evaluation.time_cv.cross_validate_time`).

    ``hold_out`` says what was held out together (an application's kernels, or each kernel);
    ``applications`` lists the kernels of each application of more than one, by its shortest
    name; ``learned_correction`` maps a ridge strength to the CV MAPE per file with the learned
    correction; ``chosen_on_all`` is the default candidate; ``chosen_per_kernel`` and
    ``aggregate_per_kernel`` count the held-out kernels each candidate and aggregate was chosen
    for; ``over_aggregates`` gives the CV MAPE per file with each aggregate alone; ``interval``
    is the time interval scored on held-out applications
    (`gpudvfs.evaluation.interval_cv.interval_cv`); ``selection`` maps each grid with power to
    its `TimeCVRegret`; ``over_device_constants`` maps constant -> scale -> `ConstantVariant`
    (`gpudvfs.evaluation.time_cv.constant_sensitivity`; None unless asked).
    """

    reference_mhz: tuple[float, ...]
    candidates: int
    kernels: int
    hold_out: str
    applications: dict[str, list[str]]
    extensions: dict[str, ExtensionScore]
    learned_correction: dict[str, dict[str, float]]
    chosen_on_all: str
    chosen_per_kernel: dict[str, int]
    aggregate_on_all: str
    aggregate_per_kernel: dict[str, int]
    over_aggregates: dict[str, dict[str, float]]
    files: dict[str, FileScore]
    per_kernel: dict[str, KernelScore]
    interval: dict
    selection: dict[str, TimeCVRegret] | None = None
    over_device_constants: dict[str, dict[str, ConstantVariant]] | None = None
