"""The governor's edges: excluded pairs in its fallbacks, inputs it must refuse with an
`InputError` (non-finite predictions, non-integer indices, standard deviations whose squares
are not finite floats), the Rust core's settings record, the replay's noise and power-cap
scoring, and the `govern` commands' bounds on their options, their log path, and the clocks a
run gives back."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import warnings
from decimal import Decimal

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from gpudvfs._core import GovernorCore, GovernorSettings
from gpudvfs.cli.app import cli
from gpudvfs.data import read_measured_grid
from gpudvfs.errors import GpudvfsWarning, InputError
from gpudvfs.evaluation import govern_replay as rp
from gpudvfs.evaluation.govern_replay import ReplaySetup, replay
from gpudvfs.evaluation.replay_table import ReplayTable, Target, replay_table
from gpudvfs.govern import Governor
from gpudvfs.govern.governor import RECHECK_RUNS, RECHECK_Z
from gpudvfs.time import TimeDevice

CFG = np.array([[500, 500], [700, 500], [900, 500], [1100, 500.0]])
T, P = [10.0, 8, 6, 5], [50.0, 70, 90, 120]


# -- the governor --------------------------------------------------------------------------

def test_the_fallbacks_never_choose_an_excluded_pair():
    """Nothing meets the cap (or the deadline): the least-power (fastest) pair the GPU can
    still hold, not one `exclude` ruled out."""
    g = Governor(CFG, 3, policy="power-cap", power_cap_w=40)
    g.phase("a", T, P)
    assert g.decide() == 0  # the lowest-power pair
    g.exclude(0)
    assert g.decide() == 1
    g = Governor(CFG, 3, policy="deadline", slowdown=0.0)
    g.phase("a", T, P)
    g.exclude(3)  # the default clocks, the only pair within a 0% slowdown
    g.exclude(2)
    assert g.decide() == 1  # the fastest pair left
    rng = np.random.default_rng(0)
    for policy, kw in (("power-cap", {"power_cap_w": 1.0}), ("deadline", {"slowdown": 0.0})):
        for _ in range(50):
            g = Governor(CFG, 3, policy=policy, **kw)
            g.phase("a", rng.uniform(1, 10, 4), rng.uniform(40, 200, 4))
            out = rng.choice(4, int(rng.integers(1, 4)), replace=False)
            for k in out:
                g.exclude(int(k))
            for _ in range(5):
                k = g.decide()
                assert k not in out
                g.observe(k, 5.0, 100.0)


@pytest.mark.parametrize("time_ms, watts, match", [
    ([10.0, 8, np.inf, 5], P, "time_ms must be positive and finite, got inf at pair 2"),
    (T, [50.0, np.nan, 90, 120], "watts must be positive and finite"),
    ([10.0, 8, 10 ** 400, 5], P, "time_ms must be 4 positive finite numbers"),
    (T, ["1e999", "1", "1", "1"], "watts must be positive and finite, got inf"),
    (T, [50.0, 70, 90], "watts must be 4 positive finite values"),
])
def test_a_phase_needs_finite_positive_predictions(time_ms, watts, match):
    g = Governor(CFG, 3)
    with pytest.raises(InputError, match=match):
        g.phase("a", time_ms, watts)
    with pytest.raises(InputError, match="no phase"):  # nothing half-made was kept
        g.decide()


def test_indices_and_numbers_must_be_what_they_say():
    g = Governor(CFG, np.int64(3))
    g.phase("a", T, P)
    g.observe(np.int32(1), np.float32(8.0), 70)  # numpy integers and floats are fine
    assert g.estimates()[0][1] == pytest.approx(np.log(8.0))
    for call, match in ((lambda: Governor(CFG, 1.0), "default_index must be an integer"),
                        (lambda: Governor(CFG, True), "default_index must be an integer"),
                        (lambda: g.observe(1.5, 5.0, 100.0), "index must be an integer"),
                        (lambda: g.observe(True, 5.0, 100.0), "index must be an integer"),
                        (lambda: g.observe(np.bool_(True), 5.0, 100.0), "index must be an integer"),
                        (lambda: g.exclude(1.5), "index must be an integer"),
                        (lambda: g.exclude(4), r"index must be in \[0, 4\)"),
                        (lambda: g.observe(1, 5.0, None), "watts must be a number, got None"),
                        (lambda: g.observe(1, "5", 100.0), "time_ms must be a number"),
                        # As everywhere numbers enter (limits.is_number): no arrays, Decimals or numpy bools.
                        (lambda: g.observe(1, np.array(5.0), 100.0), "time_ms must be a number"),
                        (lambda: g.observe(1, 5.0, Decimal("100")), "watts must be a number"),
                        (lambda: g.observe(1, 5.0, np.bool_(True)), "watts must be a number"),
                        (lambda: g.observe(1, 5.0, 10 ** 400), "must be positive and finite, got 5.0 and inf"),
                        (lambda: Governor(CFG, 1, slowdown="0.1"), "slowdown must be a number"),
                        (lambda: Governor(CFG, 1, recheck_z=-0.5), "recheck_z must be finite and >= 0"),
                        (lambda: Governor(CFG, 1, recheck_runs=0), r"recheck_runs must be an integer in \[1, 1000\]"),
                        (lambda: Governor(CFG, 1, slowdown=None), "slowdown must be a number"),
                        (lambda: Governor(CFG, 1, policy="power-cap", power_cap_w="60"),
                         "power_cap_w must be a number"),
                        (lambda: Governor(CFG, 1, policy="power-cap", power_cap_w=np.inf),
                         "power_cap_w must be finite")):
        with pytest.raises(InputError, match=match):
            call()
    assert g.estimates()[0][1] == pytest.approx(np.log(8.0))  # refused observations left nothing


@pytest.mark.parametrize("kw, match", [
    ({"noise_sd": 1e-200}, "noise_sd must be within"), ({"noise_sd": np.inf}, "noise_sd must be within"),
    ({"noise_sd": np.nan}, "noise_sd must be within"), ({"prior_sd": np.inf}, "prior_sd must be within"),
    ({"prior_sd": 1e-200}, "prior_sd must be within"), ({"residual_scale": 1e-200}, "residual_scale"),
    ({"residual_sd": 1e200}, "residual_sd must be 0 or within"),
    ({"prior_sd": 1e140, "noise_sd": 1e-140}, "prior_sd / noise_sd"),
])
def test_standard_deviations_are_refused_when_built_not_later(kw, match):
    with pytest.raises(InputError, match=match):
        Governor(CFG, 3, **kw)


# The keywords of a valid `GovernorSettings`, as `Governor`'s defaults make them.
RECORD = {"default_index": 3, "policy": "energy", "slowdown": 0.1, "power_cap_w": None, "prior_sd": 0.05,
          "noise_sd": 0.01, "explore": 4.0, "hysteresis": 0.005, "residual_sd": 0.03, "residual_scale": 0.4,
          "eta": 0.5, "max_power_w": None, "default_runs": 4, "bound_z": 0.5, "recheck_z": RECHECK_Z["energy"],
          "recheck_runs": RECHECK_RUNS}


def test_the_governor_hands_the_core_one_settings_record():
    g = Governor(CFG, 3, policy="cost", max_power_w=300, eta=0.25)
    assert isinstance(g._settings, GovernorSettings)
    assert {k: getattr(g._settings, k) for k in RECORD} == RECORD | {"policy": "cost", "max_power_w": 300.0,
                                                                     "eta": 0.25, "recheck_z": 0.0}
    assert (g.power_cap_w, g.max_power_w, g.default_runs) == (None, 300.0, 4)


def test_each_policy_takes_its_own_recheck_unless_one_is_given():
    """The energy policy rechecks by default (z 1, 5 runs), the others do not; a recheck given is
    taken under any policy, 0 turns it off."""
    assert RECHECK_Z == {"energy": 1.0} and RECHECK_RUNS == 5
    for policy, z in (("energy", 1.0), ("edp", 0.0), ("deadline", 0.0), ("cost", 0.0)):
        g = Governor(CFG, 3, policy=policy, max_power_w=300)
        assert (g.recheck_z, g.recheck_runs) == (z, 5)
        assert Governor(CFG, 3, policy=policy, max_power_w=300, recheck_z=2.0).recheck_z == 2.0
    assert Governor(CFG, 3, recheck_z=0).recheck_z == 0.0


@pytest.mark.parametrize("call, error, match", [
    (lambda: GovernorSettings(**RECORD, polcy="energy"), TypeError, "unexpected keyword argument 'polcy'"),
    (lambda: GovernorSettings(**{k: v for k, v in RECORD.items() if k != "eta"}), TypeError, "eta"),
    (lambda: GovernorSettings(*RECORD.values()), TypeError, "positional"),
    (lambda: GovernorSettings(**RECORD | {"default_index": "3"}), TypeError, "default_index"),
    (lambda: GovernorSettings(**RECORD | {"default_runs": -1}), OverflowError, "default_runs"),
    (lambda: GovernorSettings(**RECORD | {"policy": "power_cap"}), ValueError, 'unknown policy "power_cap"'),
    (lambda: GovernorSettings(**RECORD | {"policy": "cost"}), ValueError, "the cost policy needs max_power_w"),
    (lambda: GovernorSettings(**RECORD | {"noise_sd": 0.0}), ValueError, "noise_sd must be > 0 and finite, got 0"),
    (lambda: GovernorSettings(**RECORD | {"eta": float("nan")}), ValueError, r"eta must be in \[0, 1\], got NaN"),
    (lambda: GovernorSettings(**RECORD | {"recheck_z": -1.0}), ValueError, "recheck_z must be >= 0 and finite, got -1"),
    (lambda: GovernorCore(CFG, RECORD), TypeError, "'dict' object is not an instance of 'GovernorSettings'"),
    (lambda: GovernorCore(CFG, GovernorSettings(**RECORD | {"default_index": 4})), ValueError,
     "default_index 4 is not among the 4 pairs"),
])
def test_a_settings_record_of_a_wrong_name_type_or_range_is_a_clear_error(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_a_settings_record_is_read_only():
    s = GovernorSettings(**RECORD)
    with pytest.raises(AttributeError, match="not writable"):
        s.eta = 1.0


@settings(max_examples=60, deadline=None)
@given(st.fixed_dictionaries({
    "default_index": st.integers(0, 3), "policy": st.sampled_from(["energy", "edp", "deadline", "power-cap", "cost"]),
    "slowdown": st.floats(0, 10), "power_cap_w": st.none() | st.floats(1e-3, 1e6), "prior_sd": st.floats(1e-6, 1e3),
    "noise_sd": st.floats(1e-6, 1e3), "explore": st.floats(0, 1e3), "hysteresis": st.floats(0, 1),
    "residual_sd": st.floats(0, 10), "residual_scale": st.floats(1e-6, 10), "eta": st.floats(0, 1),
    "max_power_w": st.none() | st.floats(1e-3, 1e6), "default_runs": st.integers(1, 1000),
    "bound_z": st.floats(0, 10), "recheck_z": st.floats(0, 10), "recheck_runs": st.integers(1, 1000)}))
def test_a_settings_record_reads_back_and_its_repr_rebuilds_it(kw):
    bound = {"cost": "max_power_w", "power-cap": "power_cap_w"}.get(kw["policy"])
    if bound is not None and kw[bound] is None:  # the policy's bound, which it needs
        kw[bound] = 250.0
    s = GovernorSettings(**kw)
    assert {k: getattr(s, k) for k in kw} == kw
    again = eval(repr(s), {"GovernorSettings": GovernorSettings})  # noqa: S307 - the record's own repr
    assert {k: getattr(again, k) for k in kw} == kw


def test_extreme_but_valid_standard_deviations_still_govern():
    for kw in ({"noise_sd": 1e-140}, {"prior_sd": 1e100, "noise_sd": 1e-40}, {"residual_sd": 0.0}):
        g = Governor(CFG, 3, **kw)
        g.phase("a", T, P)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for _ in range(6):
                k = g.decide()
                g.observe(k, T[k], P[k])
        assert np.all(np.isfinite(np.concatenate(g.estimates()))), kw


# -- the replay ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def gtx980(data) -> ReplayTable:
    grid = read_measured_grid(data / "nv-dvfs-benchmark/gtx980_time_power_dev.csv", "test", ("nvdvfs", "grid"))
    device, spec = TimeDevice.resolve("gtx980")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return replay_table(grid, (700.0, 700.0), device, spec)


def test_noise_is_a_gaussian_truncated_to_keep_observations_positive(gtx980):
    """Draws inside (-1, 1) are the plain Gaussian's (so the 1% default changes no figure);
    the rare ones outside are drawn again, and a 30% or 45% noise replays."""
    for noise in (0.01, 0.3, 0.45):
        plain = noise * np.random.default_rng(3).standard_normal((20000, 2))
        draws = rp._noise(np.random.default_rng(3), noise, 20000)
        inside = np.abs(plain) < 1
        assert np.array_equal(draws[inside], plain[inside]) and np.all(np.abs(draws) < 1)
        assert inside.all() == (noise == 0.01)
    r = replay(gtx980, noise=0.3, steps=400, seed=0)
    assert np.isfinite(r.governor.regret_mean)


def test_power_cap_regret_is_of_time_against_the_fastest_pair_under_the_cap(gtx980):
    """The power-cap policy minimizes time under the cap: its regret is time spent over the time
    at the fastest pair under the cap (scored in energy, a governor that did its job would show
    a negative regret against that pair)."""
    cap = 60.0
    r = replay(gtx980, policy="power-cap", power_cap_w=cap, steps=1000, seed=0)
    setup = ReplaySetup.draw(gtx980, Target("power-cap", 0.1, cap), 1000, 200, 0, 0.01)
    for a in {a for a, _ in setup.plan}:
        under = gtx980.watts[a] <= cap
        assert under.any() and setup.best_k[a] == np.flatnonzero(under)[np.argmin(gtx980.time_ms[a, under])]
    apps = np.array([a for a, n in setup.plan for _ in range(n)])
    default = r.baselines["default_clocks"]
    assert default.violations == pytest.approx(np.mean(gtx980.watts[apps, gtx980.default_index] > cap))
    assert default.violations > 0.1
    assert all(v.violations is not None for v in (r.governor, *r.baselines.values()))
    # A strategy that keeps to the cap is no faster than the fastest pair under it; the default
    # clocks' regret is their time over that pair's, phase by phase.
    assert r.governor.violations < 0.01 and r.governor.regret_mean >= 0 and r.baselines["exhaustive"].regret_mean > 0
    t = gtx980.time_ms
    expected = [t[a, gtx980.default_index] / t[a, setup.best_k[a]] - 1 for a, _ in setup.plan]
    assert default.per_phase == pytest.approx(expected, rel=1e-12)
    # Each phase's steps over the cap, which add up to the share over all steps.
    assert len(default.per_phase_over) == len(setup.plan)
    assert sum(default.per_phase_over) == round(default.violations * len(apps))
    assert replay(gtx980, steps=200).governor.violations is None  # energy: no constraint to violate


def test_edp_regret_is_of_energy_times_time():
    """Under EDP a pair with less energy but more time than the best pair is a loss, not a
    gain: the models here send the fixed choice to the slow, frugal pair (80 J x 2 ms against
    the best pair's 100 J x 1 ms), whose regret is 160 / 100 - 1, where energy alone would
    score it -0.2."""
    configs = np.array([[500.0, 1000.0], [1000.0, 1000.0]])
    t, w = np.array([[2.0, 1.0]]), np.array([[40.0, 100.0]])
    table = ReplayTable(["app"], configs, 1, t, w, np.ones_like(t), w)
    r = replay(table, policy="edp", steps=50, phase_steps=50, noise=0.0)
    assert r.baselines["model_only"].regret_mean == pytest.approx(0.6, rel=1e-12)
    assert r.baselines["default_clocks"].regret_mean == 0.0 and r.governor.regret_mean >= 0
    # One application: no pair can be chosen for it on the others, so that baseline is absent.
    assert "one_pair_for_all" not in r.baselines


def test_a_cap_no_pair_can_meet_is_warned_about(gtx980):
    cap = 0.5 * float(gtx980.watts.min())  # under every pair of every application
    setup = ReplaySetup.draw(gtx980, Target("power-cap", 0.1, cap), 1000, 200, 0, 0.01, warn=False)
    apps = len({a for a, _ in setup.plan})
    with pytest.warns(GpudvfsWarning, match=f"no pair stays under the .* W cap for {apps} application"):
        r = replay(gtx980, policy="power-cap", power_cap_w=cap, steps=1000, seed=0)
    assert r.governor.violations == 1.0
    # The best pair is then the lowest-power one, where the governor falls back to: it ends there.
    assert np.array_equal(setup.best_k, np.argmin(gtx980.watts, axis=1))
    assert r.governor.regret_max < 0.05
    with pytest.raises(InputError, match="power_cap_w"):
        replay(gtx980, policy="power-cap", steps=100)
    with pytest.raises(InputError, match="seed must be an integer >= 0"):
        replay(gtx980, steps=100, seed=-1)


# -- the commands --------------------------------------------------------------------------

def _gtx980_path(data) -> str:
    return str(data / "nv-dvfs-benchmark/gtx980_time_power_dev.csv")


def test_replay_and_cv_refuse_options_of_another_policy(data):
    grid = _gtx980_path(data)
    run = CliRunner().invoke
    for cmd in (["govern", "replay", grid], ["govern", "cv", grid]):
        for args, message in ((["--power-cap", "5"], "--power-cap is for --policy power-cap"),
                              (["--policy", "deadline", "--power-cap", "5"], "--power-cap is for"),
                              (["--slowdown", "0.2"], "--slowdown is for --policy deadline"),
                              (["--policy", "power-cap", "--power-cap", "60", "--slowdown", "0.1"],
                               "--slowdown is for"),
                              (["--seed", "-1"], "--seed"), (["--noise", "nan"], "not a finite number")):
            r = run(cli, [*cmd, "--device", "gtx980", "--steps", "50", *args])
            assert r.exit_code == 2 and message in r.output, (cmd, args, r.output)
    r = run(cli, ["govern", "replay", grid, "--device", "gtx980", "--steps", "200", "--policy", "deadline",
                  "--slowdown", "0.2", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["slowdown"] == 0.2


def test_replay_command_reports_power_cap_violations(data):
    grid = _gtx980_path(data)
    r = CliRunner().invoke(cli, ["govern", "replay", grid, "--device", "gtx980", "--policy", "power-cap",
                                 "--power-cap", "60", "--steps", "400"])
    assert r.exit_code == 0, r.output
    assert "violatio" in r.output
    text = " ".join(r.output.split())
    assert "95% intervals over the applications (a phase with its application), %: governor [" in text
    assert "minus default_clocks [" in text and "random_search [" in text
    r = CliRunner().invoke(cli, ["govern", "replay", "--help"])
    assert "whose measured power exceeds the cap" in r.output and "truncated" in r.output
    r = CliRunner().invoke(cli, ["govern", "replay", grid, "--device", "gtx980", "--noise", "0.3", "--steps",
                                 "400", "--json"])
    assert r.exit_code == 0, r.output


def test_run_bounds_its_interval_and_phase_length(tmp_path):
    """A phase far shorter than an interval used to spin the simulator a turn per phase (about
    1e9 per interval) and not see SIGTERM; a 1 ns interval, 5e9 intervals. A subprocess, so a
    hang is a failure (killed at 60 s), not a stuck test run."""
    base = [sys.executable, "-c", "from gpudvfs.cli.app import cli; cli()", "govern", "run", "--device", "sim",
            "--workdir", str(tmp_path / "wd"), "--duration", "5"]
    for args, message in ((["--sim-phase-s", "1e-9"], "--sim-phase-s (1e-09) must be at least --interval (1)"),
                          (["--interval", "1e-9"], "--interval"), (["--duration", "inf"], "not a finite number")):
        r = subprocess.run(base + args, capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and message in r.stderr, (args, r.stderr)
    r = CliRunner().invoke(cli, ["govern", "run", "--device", "sim", "--workdir", str(tmp_path / "wd"),
                                 "--duration", "2", "--interval", "0.1", "--sim-phase-s", "0.1", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["intervals"] == 20


def test_run_checks_its_log_folder_first(tmp_path):
    r = CliRunner().invoke(cli, ["govern", "run", "--device", "sim", "--workdir", str(tmp_path / "wd"),
                                 "--duration", "5", "--log", str(tmp_path / "nodir" / "x.log")])
    assert r.exit_code == 2 and "does not exist" in r.output and "Traceback" not in r.output, r.output
    assert not (tmp_path / "wd").exists()  # refused before calibrating anything


def test_run_refuses_options_of_another_policy(tmp_path):
    for args, message in ((["--power-cap", "100"], "--power-cap is for"), (["--slowdown", "0.2"], "--slowdown is for"),
                          (["--policy", "power-cap", "--power-cap", "100", "--slowdown", "0.2"], "--slowdown is for")):
        r = CliRunner().invoke(cli, ["govern", "run", "--device", "sim", "--duration", "5", *args])
        assert r.exit_code == 2 and message in r.output, (args, r.output)


def test_run_reports_the_clocks_it_restored_apart_from_its_changes(tmp_path):
    """The last reset gives the clocks back to the driver: reported (clocks_restored), and
    not counted as a clock change, so the bar and the table say the same number."""
    from gpudvfs.fleet.model_prior import ModelPrior
    from gpudvfs.fleet.simhost import SimulatedHost, calibrated, phased_process
    from gpudvfs.govern.daemon import Daemon
    from gpudvfs.hardware.apps import APPS

    device, table, model = calibrated(tmp_path / "wd")
    host = SimulatedHost(device)
    host.start(phased_process(device, APPS[:2], 10.0, repeat=3))
    daemon = Daemon(device, host, ModelPrior(table, model))
    seen = []
    stats = daemon.run(30.0, progress=lambda s, total: seen.append(s.clock_changes))
    assert seen[-1] >= 2 and stats.clock_changes == seen[-1]
    assert stats.clocks_restored == device.default_clocks() == device.clocks
    run = CliRunner().invoke
    r = run(cli, ["govern", "run", "--device", "sim", "--apply", "--workdir", str(tmp_path / "wd"), "--duration", "40",
                  "--sim-phase-s", "10", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["clocks_restored"] == list(device.default_clocks())
    r = run(cli, ["govern", "run", "--device", "sim", "--apply", "--workdir", str(tmp_path / "wd"), "--duration", "40",
                  "--sim-phase-s", "10"], env={"TTY_COMPATIBLE": "1"})  # a terminal, for the bar (on stderr)
    assert r.exit_code == 0, r.output
    bar = int(re.findall(r"(\d+) clock changes", r.stderr)[-1])  # the bar's last redraw
    assert re.search(rf"clock changes\s*│\s*{bar}\s*│", r.stdout), r.output
    assert re.search(r"clocks restored to the driver\s*│\s*{:g}/{:g} MHz".format(*device.default_clocks()), r.stdout)


def test_cv_names_the_reference_it_cannot_read(data):
    r = CliRunner().invoke(cli, ["govern", "cv", str(data / "nv-dvfs-benchmark/gtx980_time_power_dev.csv"),
                                 "--device", "gtx980", "--reference", "700"])
    assert r.exit_code == 2 and "Invalid value for '--reference': expected CORE,MEM" in r.output
