"""The real workloads of `gpudvfs.hardware.apps`.

No GPU here: the Jacobi kernel's source is compiled with NVRTC for Hopper and disassembled
(it must load each neighbour and store once); the CuPy calls run against a STAND-IN ``cupy``
module that records them, so what is checked is the plumbing (data made once per process
from the host, one launch and one wait per call), not that CuPy accepts the calls. The
GPU session of issue 16 runs them for real.
"""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from gpudvfs.hardware import apps
from gpudvfs.hardware.kernels import CompileError, ToolchainMissing
from gpudvfs.hardware.kernels.nvrtc import _compile_cached
from gpudvfs.hardware.simulated import SimulatedDevice


def test_jacobi_source_compiles_for_hopper_and_reads_five_neighbours():
    try:
        compiled = _compile_cached("apps.py", apps.JACOBI_SOURCE, "sm_90", (), ("gpudvfs_jacobi5",))
    except ToolchainMissing as e:
        pytest.skip(f"NVRTC unavailable: {e}")
    assert compiled.lowered["gpudvfs_jacobi5"] == "gpudvfs_jacobi5"  # extern "C": CuPy finds it by name
    try:
        from gpudvfs.hardware.kernels.sass import disassemble

        sass = disassemble(compiled.cubin)
    except ToolchainMissing as e:
        pytest.skip(f"nvdisasm unavailable: {e}")
    assert sass.count("LDG.E") == 5 and sass.count("STG.E") == 1
    with pytest.raises(CompileError):
        _compile_cached("apps.py", apps.JACOBI_SOURCE.replace("0.2f *", "0.2f * undefined *"), "sm_90", (), ())


class _Cupy(types.ModuleType):
    """Records what the apps ask of CuPy."""

    def __init__(self):
        super().__init__("cupy")
        self.log: list[tuple] = []
        self.cuda = types.SimpleNamespace(get_current_stream=lambda: types.SimpleNamespace(
            synchronize=lambda: self.log.append(("sync",))))

    def asarray(self, a):
        self.log.append(("asarray", a.shape, a.dtype))
        return np.asarray(a)

    def empty_like(self, a):
        self.log.append(("empty_like", a.shape))
        return np.empty_like(a)

    def matmul(self, a, b, out):
        self.log.append(("matmul", a.shape, b.shape, out.shape))

    def ElementwiseKernel(self, in_params, out_params, operation, name):
        self.log.append(("compile", name))
        return lambda *args: self.log.append(("launch", name, tuple(np.shape(a) for a in args)))

    def RawKernel(self, source, name):
        assert source == apps.JACOBI_SOURCE
        self.log.append(("compile", name))
        return lambda grid, block, args: self.log.append(("launch", name, grid, block, len(args)))


@pytest.fixture
def cupy(monkeypatch):
    fake = _Cupy()
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(apps, "_state", {})
    for name in ("GEMM_N", "STREAM_N", "JACOBI_N", "HIST_N"):  # small: the host arrays are real
        monkeypatch.setattr(apps, name, 64)
    return fake


def test_each_app_makes_its_data_once_then_launches_and_waits_per_call(cupy):
    """STAND-IN cupy: a first call makes the data from the host (no kernel before the app's own,
    so ncu's first launch is it), every call launches once and waits."""
    for w in apps.APPS:
        cupy.log.clear()
        w.fn()
        first = list(cupy.log)
        cupy.log.clear()
        w.fn()
        assert cupy.log[-1] == ("sync",) and len(cupy.log) == 2, (w.name, cupy.log)
        launch = cupy.log[0]
        assert first[-2:] == [launch, ("sync",)]
        assert all(step[0] in ("asarray", "empty_like", "compile") for step in first[:-2]), (w.name, first)
        assert any(step[0] == "asarray" for step in first)
    # The shapes each kernel gets.
    cupy.log.clear()
    apps.jacobi()
    assert cupy.log[0] == ("launch", "gpudvfs_jacobi5", (2, 8), (32, 8), 3)
    apps.sgemm()
    assert cupy.log[2] == ("matmul", (64, 64), (64, 64), (64, 64))


def test_histogram_values_cover_every_bin_evenly():
    values = ((np.arange(1 << 16, dtype=np.uint32) * np.uint32(2654435761)) >> np.uint32(24)).astype(np.uint8)
    counts = np.bincount(values, minlength=256)
    assert counts.min() > 0.9 * counts.mean() and counts.max() < 1.1 * counts.mean()


def test_apps_name_a_kernel_to_profile_a_launcher_spec_and_run_on_the_simulator():
    """Each app carries what a profiler and the simulated GPU need; names are plain (they
    become file names)."""
    dev = SimulatedDevice(seed=0)
    dev.lock_clocks(*dev.default_clocks())
    for w in apps.APPS:
        assert w.name.isidentifier() and w.profile_kernel and w.spec == f"gpudvfs.hardware.apps:{w.fn.__name__}"
        dev.check(w)
        assert dev.measure(w, min_seconds=0.05).time_ms > 0
        assert "warps" in dev.profile(w)
    dev.reset_clocks()
