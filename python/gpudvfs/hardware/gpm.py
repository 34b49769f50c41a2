"""GPU activities from NVML's GPU Performance Monitoring (GPM, Hopper and newer).

The SM, pipe and DRAM utilizations between two samples, the same quantities as DCGM's
profiling fields (SM active, pipe active, DRAM active), without DCGM. Older GPUs and drivers have no
GPM: `GpmActivity.open` returns None there, and a caller falls back to NVML's coarser
utilization rates.

NVML computes each metric from two samples taken by `nvmlGpmSampleGet`; `read` keeps two
samples and alternates them, so consecutive windows share their boundary sample.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpudvfs.errors import GpudvfsError

#: (SM, pipe, DRAM): NVML GPM metric names; the pipe is the busiest of its candidates.
SM_METRIC = "NVML_GPM_METRIC_SM_UTIL"
PIPE_METRICS = ("NVML_GPM_METRIC_FP16_UTIL", "NVML_GPM_METRIC_FP32_UTIL", "NVML_GPM_METRIC_FP64_UTIL",
                "NVML_GPM_METRIC_ANY_TENSOR_UTIL")
DRAM_METRIC = "NVML_GPM_METRIC_DRAM_BW_UTIL"


class GpmActivity:
    """Activities of one GPU between GPM samples: `open`, `start` once, `read` at the end of every window, `close`."""

    def __init__(self, nv: Any, handle: Any) -> None:
        self._nv, self._handle = nv, handle
        self._ids = [getattr(nv, name) for name in (SM_METRIC, *PIPE_METRICS, DRAM_METRIC)]
        self._samples = [nv.nvmlGpmSampleAlloc(), nv.nvmlGpmSampleAlloc()]
        self._last: int | None = None

    @classmethod
    def open(cls, nv: Any, handle: Any) -> GpmActivity | None:
        """GPM on a GPU; None where the GPU, the driver or the bindings have none."""
        if not hasattr(nv, "nvmlGpmQueryDeviceSupport"):
            return None
        try:
            if not nv.nvmlGpmQueryDeviceSupport(handle).isSupportedDevice:
                return None
            return cls(nv, handle)
        except nv.NVMLError:
            return None

    def start(self) -> None:
        """Take the sample the first window starts from."""
        self._nv.nvmlGpmSampleGet(self._handle, self._samples[0])
        self._last = 0

    def read(self) -> np.ndarray:
        """(SM, busiest pipe, DRAM) fractions since the last `start` or `read`; `GpudvfsError` before `start`."""
        if self._last is None:
            raise GpudvfsError("GpmActivity.read before start")
        nv = self._nv
        first, second = self._samples[self._last], self._samples[1 - self._last]
        nv.nvmlGpmSampleGet(self._handle, second)
        self._last = 1 - self._last
        get = nv.c_nvmlGpmMetricsGet_t()
        get.version = nv.NVML_GPM_METRICS_GET_VERSION
        get.numMetrics = len(self._ids)
        get.sample1, get.sample2 = first, second
        for i, metric in enumerate(self._ids):
            get.metrics[i].metricId = metric
        nv.nvmlGpmMetricsGet(get)
        # A metric this GPU does not count (a pipe it lacks) reports an error of its own: 0.
        values = np.array([get.metrics[i].value / 100.0 if get.metrics[i].nvmlReturn == 0 else 0.0
                           for i in range(len(self._ids))])
        values = np.clip(values, 0.0, 1.0)  # percentages NVML rounds a hair past 100
        return np.array([values[0], values[1:-1].max(), values[-1]])

    def close(self) -> None:
        """Free the samples."""
        for s in self._samples:
            self._nv.nvmlGpmSampleFree(s)
        self._samples = []
