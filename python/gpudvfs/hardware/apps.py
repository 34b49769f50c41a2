"""Real workloads: kernels the way applications run them, not microbenchmarks.

A cuBLAS SGEMM, a STREAM triad, a five-point Jacobi stencil, a histogram by atomics.

On a real GPU each runs through CuPy: a zero-argument function that launches the kernel once
and waits, on data made on the first call (copied from the host, so that the kernel is the
first one the process launches). Each also carries the counters that describe it to the
simulated GPU, so a sweep, `gpudvfs validate` or the demo runs the same list anywhere.
``profile_kernel`` picks the kernel Nsight Compute profiles: a library call may launch
helpers, and cuBLAS names its kernels by tile and architecture.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from gpudvfs.hardware.device import Workload

#: Problem sizes: each launch takes a millisecond or more on an H100 at its highest clocks,
#: so the host's launch and wait (tens of microseconds) stay a small part of its time.
GEMM_N = 4096
STREAM_N = 1 << 28
JACOBI_N = 16384
HIST_N = 1 << 28

JACOBI_SOURCE = r"""
extern "C" __global__ void gpudvfs_jacobi5(const float* __restrict__ in, float* __restrict__ out, int n) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < 1 || y < 1 || x >= n - 1 || y >= n - 1) return;
    int i = y * n + x;
    out[i] = 0.2f * (in[i] + in[i - 1] + in[i + 1] + in[i - n] + in[i + n]);
}
"""

_state: dict[str, tuple] = {}


def _once(name: str, make: Callable[[], tuple]) -> tuple:
    """What ``make`` returns, made on the first call of a process (arrays, compiled kernels)."""
    if name not in _state:
        _state[name] = make()
    return _state[name]


def _sync() -> None:
    import cupy

    cupy.cuda.get_current_stream().synchronize()


def sgemm() -> None:
    """C = A B, float32, GEMM_N squared (cuBLAS; no TF32 unless CUPY_TF32=1)."""
    import cupy

    a, b, c = _once("sgemm", lambda: tuple(cupy.asarray(np.full((GEMM_N, GEMM_N), v, dtype=np.float32))
                                           for v in (1.0, 0.5, 0.0)))
    cupy.matmul(a, b, out=c)
    _sync()


def triad() -> None:
    """The STREAM triad a = b + s c over STREAM_N floats (one CuPy elementwise kernel)."""
    import cupy

    def make() -> tuple:
        kernel = cupy.ElementwiseKernel("float32 b, float32 c, float32 s", "float32 a", "a = b + s * c",
                                        "gpudvfs_triad")
        return (kernel, *(cupy.asarray(np.full(STREAM_N, v, dtype=np.float32)) for v in (0.0, 1.0, 2.0)))

    kernel, a, b, c = _once("triad", make)
    kernel(b, c, np.float32(3.0), a)
    _sync()


def jacobi() -> None:
    """One five-point Jacobi sweep over a JACOBI_N squared float32 grid (32 x 8 blocks)."""
    import cupy

    def make() -> tuple:
        src = cupy.asarray(np.ones((JACOBI_N, JACOBI_N), dtype=np.float32))
        return cupy.RawKernel(JACOBI_SOURCE, "gpudvfs_jacobi5"), src, cupy.empty_like(src)  # allocates only

    kernel, src, dst = _once("jacobi", make)
    kernel(((JACOBI_N + 31) // 32, (JACOBI_N + 7) // 8), (32, 8), (src, dst, np.int32(JACOBI_N)))
    _sync()


def histogram() -> None:
    """256-bin histogram of HIST_N bytes by global atomics (contended: a latency-bound kernel)."""
    import cupy

    def make() -> tuple:
        kernel = cupy.ElementwiseKernel("uint8 x", "raw uint32 bins", "atomicAdd(&bins[x], 1u)", "gpudvfs_histogram")
        # Bytes spread over the bins by a multiplicative hash: fast to make, no pattern a cache keeps.
        values = ((np.arange(HIST_N, dtype=np.uint32) * np.uint32(2654435761)) >> np.uint32(24)).astype(np.uint8)
        return kernel, cupy.asarray(values), cupy.asarray(np.zeros(256, dtype=np.uint32))

    kernel, values, bins = _once("histogram", make)
    kernel(values, bins)
    _sync()


def _app(name: str, fn: Callable[[], None], profile_kernel: str, counters: dict[str, float]) -> Workload:
    return Workload(name, fn=fn, spec=f"{__name__}:{fn.__name__}", counters=counters, profile_kernel=profile_kernel)


#: The real workloads. ``counters`` (nvprof counters of one launch and component utilizations)
#: are what the simulated GPU runs instead of the code: contrasting kinds, not measurements.
APPS: tuple[Workload, ...] = (
    _app("sgemm", sgemm, "regex:gemm", {
        "warps": 65536, "achieved_occupancy": 0.5, "l2_read_transactions": 2.0e6,
        "l2_write_transactions": 2.0e5, "dram_read_transactions": 5.0e5, "dram_write_transactions": 1.0e5,
        "shared_load_transactions": 6.0e6, "shared_store_transactions": 2.0e6, "inst_issued": 4.0e7,
        "util:SP": 0.85, "util:INT": 0.2, "util:L2": 0.2, "util:Shared": 0.5, "util:DRAM": 0.1}),
    _app("triad", triad, "regex:gpudvfs_triad", {
        "warps": 131072, "achieved_occupancy": 0.9, "l2_read_transactions": 4.2e6,
        "l2_write_transactions": 4.2e6, "dram_read_transactions": 4.1e6, "dram_write_transactions": 4.1e6,
        "shared_load_transactions": 0, "shared_store_transactions": 0, "inst_issued": 2.6e6,
        "util:INT": 0.1, "util:L2": 0.4, "util:DRAM": 0.85}),
    _app("jacobi", jacobi, "regex:gpudvfs_jacobi5", {
        "warps": 65536, "achieved_occupancy": 0.75, "l2_read_transactions": 3.0e6,
        "l2_write_transactions": 1.0e6, "dram_read_transactions": 2.0e6, "dram_write_transactions": 1.0e6,
        "shared_load_transactions": 3.0e6, "shared_store_transactions": 1.0e6, "inst_issued": 1.5e7,
        "util:SP": 0.4, "util:INT": 0.3, "util:L2": 0.4, "util:Shared": 0.4, "util:DRAM": 0.5}),
    _app("histogram", histogram, "regex:gpudvfs_histogram", {
        "warps": 8192, "achieved_occupancy": 0.25, "l2_read_transactions": 1.0e6,
        "l2_write_transactions": 1.0e6, "dram_read_transactions": 3.0e5, "dram_write_transactions": 3.0e5,
        "shared_load_transactions": 1.5e6, "shared_store_transactions": 5.0e5, "inst_issued": 3.0e6,
        "util:INT": 0.3, "util:L2": 0.3, "util:Shared": 0.3, "util:DRAM": 0.2}),
)
