"""`Governor`: the next clocks of a running workload.

It starts from the offline models' predictions, corrected online by what each interval
measures.

Per phase (a workload, or one part of it), the governor holds the offline prediction of
time and power at every supported pair and two covariance-form RLS streams that learn the
prediction's error in log space as a linear function of (1, log fc/fc_default, log
fm/fm_default): a model that is off by a smooth factor is corrected everywhere after a
few pairs are measured. A pair measured itself is known by its own mean. Each decision
minimizes the policy's objective on these estimates, and explores an unmeasured pair
instead only where its optimistic estimate (the lower confidence bound) beats the best
estimate by more than the hysteresis: a flat energy surface is not explored, and the
clocks change only for a predicted gain. A pair run fewer than ``recheck_runs`` times is run
again where its mean less ``recheck_z`` of its standard deviations beats the best by the
hysteresis (not under a deadline, whose pairs already run are confirmed against its bound):
one noisy run does not rule the best pair out for the phase. The confidence bounds widen by
how much more the pairs measured so far surprised the prediction than its variance said (the
mean normalized squared innovation): a phase the models predict badly is explored more.

What a linear correction cannot follow (a prediction off in the middle of the range and
right at its ends, a measured surface rough from pair to pair) is a residual of standard
deviation ``residual_sd`` per pair, correlated between pairs as exp(-d^2 / 2 l^2) in
log-frequency distance d (l: ``residual_scale``). An unmeasured pair takes the residual of
its most correlated measured pair, times that correlation, and keeps the residual's
variance less what that pair explains: near what was measured the estimate follows the
measurement, far from it the bound stays wide however many pairs the linear part has seen.

Under a deadline the bound is the default clocks' measured time times (1 + slowdown), and the
pair a phase settles on is often the slowest just under it: measured on a few runs, a pair just
over can pass, and every step of the phase is then over. A pair already run therefore needs
``confirm_z`` standard deviations (of its mean relative to the default's) under the bound;
short of that the default clocks run again (with ``confirm_pair``, whichever of the two has the
less certain mean: a pair run once is short by its own single run), up to ``confirm_runs`` runs
of each, and then the pair is left for the phase (`gpudvfs.evaluation.deadline_cv` chose the
three, each file held out).

The estimates and decisions run in the Rust core (`rust/src/govern/`, the RLS streams the
online predictor's): a decision over 200 pairs costs microseconds. This class checks the
arguments and keeps the phase keys, the current pair and the decision log.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from gpudvfs._core import GovernorCore, GovernorSettings
from gpudvfs.errors import InputError
from gpudvfs.govern.knob import knob_rows
from gpudvfs.limits import is_finite_number, is_integer, is_number
from gpudvfs.policy.policies import POLICIES

#: The policies the governor decides by: every one of `gpudvfs.policy.POLICIES` but ED2P, for
#: which the Rust core has no objective.
GOVERNOR_POLICIES = tuple(p for p in POLICIES if p != "ed2p")
#: The relative error of a prior from the fitted time and power models (the replays' and the
#: daemon's `ModelPrior`), the bound's width, the residual's (relative) and its correlation
#: length (in log-frequency): `gpudvfs govern defaults` on the GTX 980 and V100 grids (the least
#: mean regret over the energy, EDP and deadline policies and seeds 0-4, deadline steps over the
#: bound at most 5%; a test holds them to it); docs/accuracy.md gives the held-out figures of
#: `gpudvfs govern defaults --cv` (this choice with each application left out) and how they move
#: with each constant.
MODEL_PRIOR_SD = 0.05
EXPLORE = 4.0
RESIDUAL_SD = 0.03
RESIDUAL_SCALE = 0.4
#: Deadline: runs of the default clocks before any other pair, and the margin under the bound
#: in standard deviations of a pair's time relative to the default's.
DEFAULT_RUNS = 4
BOUND_Z = 0.5
#: Deadline: the margin a pair already run needs, in standard deviations of its measured mean
#: relative to the default's, and the runs of each that may be added to confirm it (past them, a
#: pair without the margin is left for the phase).
CONFIRM_Z = 1.5
CONFIRM_RUNS = 8
#: Deadline: whether the confirmation also runs the pair itself again, where its mean is the less
#: certain of the two (up to ``confirm_runs`` runs of it), rather than the default clocks alone.
CONFIRM_PAIR = True
#: The recheck: a measured pair is run again while its mean, less ``recheck_z`` standard
#: deviations of it, beats the best, until it has run ``recheck_runs`` times (0: never). The
#: energy policy takes z 1 and 5 runs; EDP and cost none, a deadline never (its confirmation
#: re-runs pairs), and power-cap none (not replayed). Chosen per policy with the other
#: constants at their defaults, each application of the GTX 980 and V100 grids held out (seeds
#: 0-4; `evaluation.governor_cv.choose_defaults`): energy 0.976% regret against 1.041% off; EDP
#: 1.575% and cost 0.884% with it, against 1.489% and 0.723% off. On the Zeus and Perseus traces,
#: which had no part in the choice, energy regret falls from 0.072 / 0.262 / 0.218 / 0.422% to
#: 0.048 / 0.150 / 0.143 / 0.194% (docs/accuracy.md).
RECHECK_Z = {"energy": 1.0}
RECHECK_RUNS = 5
#: What a standard deviation (or a ratio of two) may be: its square, a variance, must be a
#: finite positive float.
SD_RANGE = (1e-150, 1e150)


def policy_recheck_z(policy: str) -> float:
    """The recheck's width a policy takes by default (`RECHECK_Z`; 0: none)."""
    return RECHECK_Z.get(policy, 0.0)


def _setting(name: str) -> property:
    """A constant the governor was constructed with; read-only, since the Rust core holds it."""
    return property(lambda self: getattr(self._settings, name), doc=f"``{name}``, as constructed (read-only).")


def _own(name: str) -> property:
    """A constant this class keeps itself (the Rust core has no use for it); read-only."""
    return property(lambda self: getattr(self, f"_{name}"), doc=f"``{name}``, as constructed (read-only).")


class Governor:
    """Choose clocks for a workload under a policy.

    ``energy`` (least energy per unit of work), ``edp`` (energy x time), ``deadline`` (least
    energy at most ``slowdown`` slower than the default clocks), ``power-cap`` (fastest within
    ``power_cap_w``) or ``cost`` (Zeus's: least ``eta * energy + (1 - eta) * max_power_w * time``).

    Use: `phase` with the offline prediction when a workload (or a phase of it) starts, then
    alternately `decide` and `observe`.

    Parameters
    ----------
    configs : array_like
        [K x 2] the settings of ``knob`` (`knob.knob_rows`): (core, memory) MHz pairs, or
        (value, 1) rows of a knob of one value.
    default_index : int
        The default setting among them.
    policy : str
        One of `GOVERNOR_POLICIES`.
    slowdown : float
        deadline: the bound on the time over the default clocks'.
    power_cap_w : float or None
        power-cap: the cap (W).
    eta : float
        cost: the weight of energy against time, in [0, 1].
    max_power_w : float or None
        cost: the watts that price a second (Zeus's MAXPOWER).
    default_runs : int
        deadline: runs of the default clocks before any other pair.
    bound_z : float
        deadline: the margin under the bound, in standard deviations of a pair's time
        relative to the default's.
    confirm_z, confirm_runs, confirm_pair : float, int, bool
        deadline: a pair already run, within ``confirm_z`` standard deviations of the bound,
        makes the default clocks run again (with ``confirm_pair``, whichever of the two is less
        certain), up to ``confirm_runs`` runs of each in all, then is left for the phase (0: no
        check; module notes).
    prior_sd : float
        The relative error of the offline predictions (their cross-validated error).
    noise_sd : float
        The relative error of one measurement.
    explore : float
        The confidence bound's width in standard deviations.
    hysteresis : float
        The least predicted relative gain worth a clock change or an exploration.
    recheck_z, recheck_runs : float or None, int
        A pair run fewer than ``recheck_runs`` times is run again where its mean less
        ``recheck_z`` standard deviations beats the best by the hysteresis (0: never; not
        under a deadline; None: the policy's, `RECHECK_Z`).
    residual_sd : float
        The residual's relative standard deviation per pair (module notes; 0: none).
    residual_scale : float
        The residual's correlation length in log-frequency.
    log : callable or None
        Called with a dict for every decision (the structured decision log; see `decide`),
        e.g. `gpudvfs.data.jsonfile.JsonLines(path).write` or `GovernorMetrics.record`.
    knob : str
        What ``configs`` set (`knob.KNOBS`): their unit and their check.

    Raises
    ------
    InputError
        Where a setting is out of its range, or a policy lacks its bound.
    """

    default_index, policy, slowdown, power_cap_w, eta, max_power_w = map(_setting, (
        "default_index", "policy", "slowdown", "power_cap_w", "eta", "max_power_w"))
    prior_sd, noise_sd, explore, hysteresis, residual_sd, residual_scale, default_runs, bound_z = map(_setting, (
        "prior_sd", "noise_sd", "explore", "hysteresis", "residual_sd", "residual_scale", "default_runs", "bound_z"))
    recheck_z, recheck_runs = map(_setting, ("recheck_z", "recheck_runs"))
    configs, confirm_z, confirm_runs, confirm_pair = map(_own, ("configs", "confirm_z", "confirm_runs", "confirm_pair"))

    def __init__(self, configs: ArrayLike, default_index: int, *, policy: str = "energy", slowdown: float = 0.1,
                 power_cap_w: float | None = None, eta: float = 0.5, max_power_w: float | None = None,
                 default_runs: int = DEFAULT_RUNS, bound_z: float = BOUND_Z, confirm_z: float = CONFIRM_Z,
                 confirm_runs: int = CONFIRM_RUNS, confirm_pair: bool = CONFIRM_PAIR,
                 prior_sd: float = MODEL_PRIOR_SD, noise_sd: float = 0.01, explore: float = EXPLORE,
                 hysteresis: float = 0.005, residual_sd: float = RESIDUAL_SD, residual_scale: float = RESIDUAL_SCALE,
                 recheck_z: float | None = None, recheck_runs: int = RECHECK_RUNS,
                 log: Callable[[dict], None] | None = None, knob: str = "clocks") -> None:
        cfg = knob_rows(configs, knob)
        default_index = _index("default_index", default_index, len(cfg))
        if policy not in GOVERNOR_POLICIES:
            raise InputError(f"unknown policy {policy!r}; expected one of {GOVERNOR_POLICIES}")
        if policy == "power-cap" and power_cap_w is None:
            raise InputError("the power-cap policy needs power_cap_w > 0, got None")
        if power_cap_w is not None and not 0 < (power_cap_w := _number("power_cap_w", power_cap_w)) < np.inf:
            raise InputError(f"power_cap_w must be finite and > 0, got {power_cap_w}")
        if not (is_finite_number(eta, 0.0) and eta <= 1):
            raise InputError(f"eta must be a number in [0, 1], got {eta!r}")
        if policy == "cost" and max_power_w is None:
            raise InputError("the cost policy needs max_power_w > 0 (the watts that price a second), got None")
        if max_power_w is not None and not 0 < (max_power_w := _number("max_power_w", max_power_w)) < np.inf:
            raise InputError(f"max_power_w must be finite and > 0, got {max_power_w}")
        if recheck_z is None:
            recheck_z = policy_recheck_z(policy)
        slowdown, explore, hysteresis, bound_z, confirm_z, recheck_z = (_number(name, v, 0.0) for name, v in (
            ("slowdown", slowdown), ("explore", explore), ("hysteresis", hysteresis), ("bound_z", bound_z),
            ("confirm_z", confirm_z), ("recheck_z", recheck_z)))
        for name, runs in (("default_runs", default_runs), ("confirm_runs", confirm_runs),
                           ("recheck_runs", recheck_runs)):
            if not (is_integer(runs) and 1 <= runs <= 1000):
                raise InputError(f"{name} must be an integer in [1, 1000], got {runs!r}")
        if not isinstance(confirm_pair, bool | np.bool_):
            raise InputError(f"confirm_pair must be True or False, got {confirm_pair!r}")
        residual_sd = _sd("residual_sd", residual_sd, zero=True)
        prior_sd, noise_sd, residual_scale = (_sd(name, v) for name, v in (
            ("prior_sd", prior_sd), ("noise_sd", noise_sd), ("residual_scale", residual_scale)))
        if not SD_RANGE[0] <= prior_sd / noise_sd <= SD_RANGE[1]:
            # The RLS prior covariance is (prior_sd / noise_sd)^2: it must be a finite positive float.
            raise InputError(f"prior_sd / noise_sd must be within [{SD_RANGE[0]:g}, {SD_RANGE[1]:g}], got "
                             f"{prior_sd} / {noise_sd}")
        self._configs, self._confirm_z, self._confirm_runs, self._confirm_pair = (
            cfg, confirm_z, int(confirm_runs), bool(confirm_pair))
        self._settings = GovernorSettings(
            default_index=default_index, policy=policy, slowdown=slowdown, power_cap_w=power_cap_w, prior_sd=prior_sd,
            noise_sd=noise_sd, explore=explore, hysteresis=hysteresis, residual_sd=residual_sd,
            residual_scale=residual_scale, eta=float(eta), max_power_w=max_power_w, default_runs=int(default_runs),
            bound_z=bound_z, recheck_z=recheck_z, recheck_runs=int(recheck_runs))
        self._core = GovernorCore(cfg, self._settings)
        self.knob = knob
        self._phases: dict[object, int] = {}  # key -> the core's phase id
        self._runs: dict[int, np.ndarray] = {}  # phase id -> [K] times each pair's time was measured
        self._left: dict[int, set[int]] = {}  # phase id -> the pairs it is not run at again
        self._phase: int | None = None
        self.current = self.default_index
        self.changes = 0
        self.log = log
        self._key: object = None
        self._last: dict | None = None

    def phase(self, key: Hashable, time_ms: ArrayLike | None, watts: ArrayLike | None) -> None:
        """Switch to phase ``key``; a new one starts from the offline predictions.

        A known one resumes what it learnt, and ignores them.

        Parameters
        ----------
        key : hashable
            The phase.
        time_ms : array_like or None
            [K] predicted time per unit of work at each pair (a known phase: ignored).
        watts : array_like or None
            [K] predicted power at each pair (a known phase: ignored).

        Raises
        ------
        InputError
            Where a new phase's predictions are not K positive finite values.
        """
        self._key = key
        if key in self._phases:
            self._phase = self._phases[key]
            return
        t, p = (_prediction(key, name, x, len(self.configs)) for name, x in (("time_ms", time_ms), ("watts", watts)))
        self._phase = self._phases[key] = self._core.add_phase(t, p)
        self._runs[self._phase] = np.zeros(len(self.configs), dtype=int)
        self._left[self._phase] = set()

    def _require(self) -> int:
        if self._phase is None:
            raise InputError("no phase: call Governor.phase(key, time_ms, watts) first")
        return self._phase

    def _id(self, key: Hashable | None) -> int:
        if key is None:
            return self._require()
        if key not in self._phases:
            raise InputError(f"no phase {key!r}; known: {list(self._phases)}")
        return self._phases[key]

    def estimates(self, key: Hashable | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """A phase's estimates at every pair (None: the current phase's).

        A measured pair by its own mean, the others by the prior corrected by the RLS streams (their
        variance widened by how much more the pairs measured so far surprised it than it expected)
        and by the residual of their most correlated measured pair.

        Returns
        -------
        tuple of numpy.ndarray
            [K] log time, log watts, and their variances.

        Raises
        ------
        InputError
            Before the first `phase`, or for a phase never started.
        """
        return self._core.estimates(self._id(key))

    def runs(self, key: Hashable | None = None) -> np.ndarray:
        """[K] how many intervals with a measured time a phase observed at each pair (None: the current phase).

        Raises
        ------
        InputError
            Before the first `phase`, or for a phase never started.
        """
        return self._runs[self._id(key)].copy()

    def decide(self) -> int:
        """The pair to run next; logs the decision (``log``).

        The least objective among the allowed pairs, unless an unmeasured pair's lower confidence
        bound beats it by more than the hysteresis (then that pair, explored), or the current pair is
        within the hysteresis of it (then the current pair).

        Returns
        -------
        int
            The pair's index.

        Raises
        ------
        InputError
            Before the first `phase`.
        """
        ph = self._require()
        nxt, explored, log_e, log_e_default = self._core.decide(ph, self.current)
        d, runs, left = self.default_index, self._runs[ph], self._left[ph]
        while (self.policy == "deadline" and self.confirm_z > 0 and nxt != d and runs[nxt] > 0
               and not left & {nxt, d}):
            # A pair already run: its mean and the default's are measured, the margin is theirs.
            # One over the bound was chosen as the least violation (none within it): kept.
            lt, lp, vt, _ = self._core.estimates(ph)
            bound = lt[d] + math.log1p(self.slowdown)
            if lt[nxt] > bound or lt[nxt] + self.confirm_z * math.sqrt(vt[nxt] + vt[d]) <= bound:
                break
            # The default clocks run again; with ``confirm_pair``, whichever of the two is less certain.
            order = ((nxt, d) if vt[nxt] > vt[d] else (d, nxt)) if self.confirm_pair else (d,)
            again = next((k for k in order if runs[k] < self.confirm_runs), None)
            if again is not None:
                nxt, explored, log_e = again, True, float(lt[again] + lp[again])
                break
            self.exclude(nxt)
            nxt, explored, log_e, log_e_default = self._core.decide(ph, self.current)
        changed = nxt != self.current
        if changed:
            self.changes += 1
            self.current = nxt
        if self.log is not None:
            self.log(self._entry(nxt, explored, changed, log_e, log_e_default))
        return nxt

    def _entry(self, k: int, explored: bool, changed: bool, log_e: float, log_e_default: float) -> dict:
        """One decision, for the log.

        The pair, why, what it is expected to save against the default clocks, and the last
        observation (with what it saved, measured).
        """
        core, mem = self._configs[k].tolist()
        entry = {"phase": self._key, "index": k, "core_mhz": core, "mem_mhz": mem, "explored": bool(explored),
                 "changed": bool(changed), "predicted_saving": _saving(log_e - log_e_default), "observed": self._last}
        if self._last is not None and self._last["time_ms"] is not None:
            # In log space, as the estimates are: a product of two large values may overflow.
            measured = math.log(self._last["time_ms"]) + math.log(self._last["watts"])
            entry["realized_saving"] = _saving(measured - log_e_default)
        return entry

    def exclude(self, index: int) -> None:
        """Leave a pair the GPU did not hold for the current phase.

        Its power or thermal limit pulled the clocks down: the phase is not run there again, nor
        explored.

        Parameters
        ----------
        index : int
            The pair.

        Raises
        ------
        InputError
            Before the first `phase`, or for an index outside [0, K).
        """
        ph, index = self._require(), _index("index", index, len(self.configs))
        self._core.exclude(ph, index)
        self._left[ph].add(index)

    def observe(self, index: int, time_ms: float | None, watts: float) -> None:
        """Learn what one interval at a pair measured.

        Parameters
        ----------
        index : int
            The pair it ran at.
        time_ms : float or None
            Its time per unit of work; None where the work done was not measured (a daemon
            without a progress signal): the power is learnt, the time stays the prediction.
        watts : float
            Its power.

        Raises
        ------
        InputError
            Before the first `phase`, for an index outside [0, K), or a time or power that is
            not positive and finite.
        """
        ph = self._require()
        index = _index("index", index, len(self.configs))
        watts = _number("watts", watts)
        time_ms = None if time_ms is None else _number("time_ms", time_ms)
        if not (math.isfinite(watts) and watts > 0 and (time_ms is None or (math.isfinite(time_ms) and time_ms > 0))):
            raise InputError(f"observed time and watts must be positive and finite, got {time_ms} and {watts}")
        self._last = {"index": int(index), "time_ms": None if time_ms is None else float(time_ms),
                      "watts": float(watts)}
        self._core.observe(ph, index, None if time_ms is None else math.log(time_ms), math.log(watts))
        self._runs[ph][index] += time_ms is not None

    def measured(self) -> tuple[np.ndarray, list[int]]:
        """The current phase's intervals observed with a time at each pair [K], and the pairs left (`exclude`).

        Returns
        -------
        tuple
            [K] counts (a copy), and the sorted indices left.

        Raises
        ------
        InputError
            Before the first `phase`.
        """
        ph = self._require()
        return self._runs[ph].copy(), sorted(self._left[ph])


def _saving(log_ratio: float) -> float:
    """1 - exp(``log_ratio``), -inf past a float's range (each decision: math, not numpy, for speed)."""
    return -math.expm1(log_ratio) if log_ratio < 709.0 else -math.inf


def _number(name: str, value: Any, low: float | None = None) -> float:
    """``value`` as a float, >= ``low`` and finite where ``low`` is given.

    A number as :func:`~gpudvfs.limits.is_number` says: not a string, a bool, an array or a
    Decimal.
    """
    if not is_number(value):
        raise InputError(f"{name} must be a number, got {value!r}")
    try:
        x = float(value)
    except OverflowError:  # an int beyond any float
        x = math.inf if value > 0 else -math.inf
    if low is not None and not is_finite_number(value, low):
        raise InputError(f"{name} must be finite and >= {low:g}, got {value}")
    return x


def _sd(name: str, value: Any, zero: bool = False) -> float:
    """A standard deviation (or length scale) whose square is a finite float, positive unless ``zero``."""
    x = _number(name, value)
    if not ((zero and x == 0) or SD_RANGE[0] <= x <= SD_RANGE[1]):
        raise InputError(f"{name} must be {'0 or ' if zero else ''}within [{SD_RANGE[0]:g}, {SD_RANGE[1]:g}] "
                         f"(its square is a variance), got {value}")
    return x


def _prediction(key: Hashable, name: str, values: ArrayLike | None, k: int) -> np.ndarray:
    """A phase's offline prediction of ``name``: ``k`` finite positive values."""
    try:
        x = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"phase {key!r}: {name} must be {k} positive finite numbers") from None
    if x.shape != (k,):
        raise InputError(f"phase {key!r}: {name} must be {k} positive finite values (one per pair), got shape "
                         f"{x.shape}")
    bad = ~(np.isfinite(x) & (x > 0))
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(f"phase {key!r}: {name} must be positive and finite, got {x[i]} at pair {i}")
    return x


def _index(name: str, value: Any, k: int) -> int:
    """An integer (Python's or numpy's; not a bool) in [0, k)."""
    if not is_integer(value):
        raise InputError(f"{name} must be an integer pair index, got {value!r}")
    if not 0 <= value < k:
        raise InputError(f"{name} must be in [0, {k}), got {value}")
    return int(value)
