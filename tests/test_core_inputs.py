"""Input the Rust core must answer with a Python exception: never a panic (PanicException)
and never an abort of the interpreter.

Sizes the memory cannot hold run in a child interpreter under an address-space limit
(RLIMIT_AS), so that an allocation the system refuses fails the same way on any machine,
whatever its memory and overcommit policy; an abort there (Rust's "memory allocation of N
bytes failed") would otherwise take the test run down with it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import gpudvfs
from gpudvfs import _core
from gpudvfs.power.equations import power_grid_numpy

# Each case runs in the child after the limit is set; it prints one JSON line per case, so a
# case that aborts the child leaves the cases after it unreported.
_CHILD = r"""
import json, resource, sys
import numpy as np
import gpudvfs
from gpudvfs import OnlinePredictorBank, _core

def vm_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024

ROW = np.array([6400, 32, 8, 10, 4, 0.5, 100, 0, 0, 0, 0, 0], dtype=float)  # a valid kernel

def budget_exact():
    # Two GPUs of 65,536 options, all on the Pareto front: 2^32 candidate states.
    k = 1 << 16
    cost = np.tile(np.arange(k, dtype=float), (2, 1))
    return _core.budget_solve(cost, k - cost, 1e12, True)

def bank_threads():
    # 2^22 streams and threads=10**6: 1,024 workers, 2 GiB of stacks, past the limit, where
    # a spawn that fails panicked; at most 256 (512 MiB) are spawned.
    s = 1 << 22
    bank = OnlinePredictorBank(s, 1, threads=10**6)
    return bank.update(np.ones((s, 1)), np.ones(s))["applied"]

def power_fit_distinct_clocks():
    # 2^17 rows at clocks all different: the layout's dense table of level pairs was 2^34
    # entries (128 GiB).
    n = 1 << 17
    core, mem = 500 + 0.01 * np.arange(n), 800 + 0.01 * np.arange(n)[::-1]
    util = np.random.default_rng(0).uniform(0.1, 1.0, (n, 2))
    watts = 50 + 100 * util.sum(1) * core / 1000 + 0.01 * mem
    m = _core.PowerFit.fit(watts, core, mem.copy(), util, [1, 1], core[7], mem[7], "per-domain",
                           5, 1e-6, 1e-9, 0.5, 1.5, False, 0.0)
    return len(m.state()["configs"])

def power_fit_many_components():
    # 4 rows of 2^15 components: moments of 4 x 32770^2 values (32 GiB).
    nc = 1 << 15
    core, mem = np.array([1000.0, 1000.0, 800.0, 800.0]), np.array([3000.0, 2000.0, 3000.0, 2000.0])
    return _core.PowerFit.fit(np.array([100.0, 90.0, 80.0, 70.0]), core, mem, np.full((4, nc), 0.5),
                              [nc - 1, 1], 1000.0, 3000.0, "per-domain", 5, 1e-6, 1e-9, 0.5, 1.5, False, 0.0)

CASES = {
    "bank 2^31 x 4": lambda: OnlinePredictorBank(2**31, 4),
    "bank 2^40 x 4": lambda: OnlinePredictorBank(2**40, 4),
    "bank 2^28 x 4096": lambda: OnlinePredictorBank(2**28, 4096),
    "bank 2^62 x 4": lambda: OnlinePredictorBank(2**62, 4),
    "power grid 2^16 x 2^16": lambda: gpudvfs.power_grid(
        np.full((2**16, 1), 0.5), [1], [1.0], [1.0], [2.0], np.ones((2**16, 1)), np.ones((2**16, 1))),
    "power grid without components": lambda: gpudvfs.power_grid(
        np.zeros((2**40, 0)), [0], [1.0], [1.0], [], np.ones((2**10, 1)), np.ones((2**10, 1))),
    "time model 2^12 x 2^20": lambda: _core.time_predict(
        np.tile(ROW, (2**12, 1)), np.full(2**20, 700.0), np.full(2**20, 900.0),
        _core.time_device_gtx980(), "default"),
    "exact budget": budget_exact,
    "power fit at 2^17 distinct clock pairs": power_fit_distinct_clocks,
    "power fit of 2^15 components": power_fit_many_components,
    "bank threads": bank_threads,
}
limit = vm_bytes() + (1 << 30)
resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
for name, case in CASES.items():
    try:
        out = {"result": repr(case())}
    except BaseException as e:
        out = {"error": type(e).__name__, "message": str(e)}
    print(json.dumps({name: out}), flush=True)
"""

# case: (exception type, fragment of its message), or None where the call must succeed.
EXPECTED = {
    "bank 2^31 x 4": ("MemoryError", "cannot allocate 171798691840 bytes"),
    "bank 2^40 x 4": ("MemoryError", "1099511627776 streams x 4 features"),
    "bank 2^28 x 4096": ("MemoryError", "268435456 streams x 4096 features"),
    "bank 2^62 x 4": ("ValueError", "too large"),
    "power grid 2^16 x 2^16": ("MemoryError", "cannot allocate 34359738368 bytes"),
    "power grid without components": ("MemoryError", "1099511627776 workloads x 1024 configurations"),
    "time model 2^12 x 2^20": ("MemoryError", "4096 kernels x 1048576 clock pairs"),
    "exact budget": ("ValueError", "too large an instance for the exact solver"),
    "power fit at 2^17 distinct clock pairs": None,
    "power fit of 2^15 components": ("MemoryError", "the moments of 4 configurations x 32768 components"),
    "bank threads": None,
}


@pytest.fixture(scope="module")
def limited_run():
    if not sys.platform.startswith("linux"):
        pytest.skip("RLIMIT_AS and /proc/self/status are Linux's")
    # One malloc arena: glibc reserves 64 MiB of address space for each further one, as many
    # as its threads ask for, which would make the limit's margin depend on the core count.
    env = os.environ | {"MALLOC_ARENA_MAX": "1"}
    r = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=600, env=env)
    results = {}
    for line in r.stdout.splitlines():
        results.update(json.loads(line))
    return r, results


@pytest.mark.parametrize("case", list(EXPECTED))
def test_sizes_beyond_memory_are_exceptions_not_aborts(limited_run, case):
    r, results = limited_run
    assert case in results, (
        f"the child died before reporting {case!r} (exit status {r.returncode}):\n{r.stderr[-2000:]}")
    got, want = results[case], EXPECTED[case]
    if want is None:
        assert "result" in got, got
    else:
        assert got.get("error") == want[0] and want[1] in got["message"], got


def test_calls_that_fit_give_their_results(limited_run):
    r, results = limited_run
    assert results["bank threads"] == {"result": str(1 << 22)}
    assert results["power fit at 2^17 distinct clock pairs"] == {"result": str(1 << 17)}
    assert r.returncode == 0, r.stderr[-2000:]


def test_power_grid_without_components_is_static_and_idle_power():
    """Every domain size 0 is accepted by the wrapper and computed by the numpy reference:
    static plus idle power, the same for every workload. The kernel divided by zero."""
    util = np.zeros((3, 0))
    freqs = np.array([[1.0, 1.0], [0.5, 0.8], [1.2, 0.9]])
    volts = np.array([[1.0, 1.0], [0.9, 0.95], [1.1, 0.97]])
    args = (util, [0, 0], [30.0, 10.0], [20.0, 5.0], [], freqs, volts)
    got = gpudvfs.power_grid(*args)
    want = power_grid_numpy(*args)
    assert got.shape == (3, 3)
    np.testing.assert_allclose(got, want, rtol=1e-14)
    (vc, vm), (fc, fm) = volts.T, freqs.T
    by_hand = 30 * vc + vc**2 * fc * 20 + 10 * vm + vm**2 * fm * 5
    np.testing.assert_allclose(got, np.tile(by_hand, (3, 1)), rtol=1e-14)
    # The audit's call: two workloads, four configurations of two domains.
    p = gpudvfs.power_grid(np.zeros((2, 0)), [0, 0], [1, 1], [1, 1], [], np.ones((4, 2)), np.ones((4, 2)))
    np.testing.assert_array_equal(p, np.full((2, 4), 4.0))
    assert gpudvfs.power_grid(np.zeros((0, 0)), [0], [1], [1], [], np.ones((4, 1)), np.ones((4, 1))).shape == (0, 4)


def test_domain_sizes_that_overflow_are_a_value_error():
    """The extension called directly (the wrapper adds Python ints, which do not overflow):
    sizes whose sum wraps to 0 passed the checks and divided by zero or indexed past the
    weights."""
    ones = np.ones
    for sizes in ([2**63, 2**63], [2**64 - 1, 1]):
        with pytest.raises(ValueError, match="add up to more components than can exist"):
            _core.power_grid(np.zeros((1, 0)), sizes, ones(2), ones(2), ones(0), ones((1, 2)), ones((1, 2)))
    state = {
        "variant": "per-config", "ref_mhz": [1000.0, 3000.0], "domain_sizes": [1, 1],
        "static_coef": [1.0, 1.0], "idle_coef": [1.0, 1.0], "weights": [1.0, 1.0],
        "configs": [[1000.0, 3000.0]], "voltages": [1.0, 1.0], "on_bound": [False, False],
        "levels_mhz": [[], []], "level_voltages": [[], []], "curves": None, "folded": [False, False],
        "iterations": 1, "converged": True, "sse": 0.0, "objective": 0.0, "train_mape": 0.0, "notes": [],
    }
    model = _core.PowerFit.from_state(state)
    assert model.predict(np.array([[0.5, 0.5]]), np.array([1000.0]), np.array([3000.0]))[0] == pytest.approx(5.0)
    with pytest.raises(ValueError, match="add up to more components than can exist"):
        _core.PowerFit.from_state(state | {"domain_sizes": [2**63, 2**63], "weights": []})


def test_a_fortran_ordered_matrix_is_refused_not_read_as_its_transpose():
    """A 2-D argument must be C-contiguous: a Fortran-ordered one is contiguous too, and read
    as is its columns would pass for rows. The budget's cost matrix [GPUs x options] and the
    time model's kernel rows are refused with the argument's name; the C-ordered copy works."""
    cost = np.asfortranarray([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    with pytest.raises(ValueError, match="cost must be a C-contiguous array"):
        _core.budget_solve(cost, np.ascontiguousarray(cost), 100.0)
    assert len(_core.budget_solve(np.ascontiguousarray(cost), np.ascontiguousarray(cost), 100.0)[0]) == 2
    rows = np.asfortranarray([[6400, 32, 8, 10, 4, 0.5, 100, 0, 0, 0, 0, 0]] * 2, dtype=float)
    device = gpudvfs.TimeDevice.preset("gtx980").params()
    one = np.array([700.0])
    with pytest.raises(ValueError, match="inputs must be a C-contiguous array"):
        _core.time_predict(rows, one, one, device, "default")
    assert _core.time_predict(np.ascontiguousarray(rows), one, one, device, "default")[0].shape == (2, 1)
