"""The GPUs gpudvfs knows: specifications (SMs, clocks, rates, latencies, TDP) by name or alias.

They come from the built-in ``gpus.json`` and any file of the same shape (:mod:`.specs`); the
clock pairs each supports from :mod:`.clocks`; the power models' priors are in
``power_prior.json`` (:mod:`gpudvfs.power.prior`).
"""

from gpudvfs.catalog.clocks import SupportedClocks
from gpudvfs.catalog.specs import (
    CATALOG_VERSION,
    CLOCK_MARGIN,
    HOW_TO_CALIBRATE,
    ISSUE_KEYS,
    LATENCY_KEYS,
    SECTOR_BYTES,
    SHARED_WAVEFRONT_BYTES,
    SUSTAINED_DRAM_FRACTION,
    DeviceSpec,
    catalog,
    lookup,
)

__all__ = ["CATALOG_VERSION", "CLOCK_MARGIN", "HOW_TO_CALIBRATE", "ISSUE_KEYS", "LATENCY_KEYS", "SECTOR_BYTES",
           "SHARED_WAVEFRONT_BYTES", "SUSTAINED_DRAM_FRACTION", "DeviceSpec", "SupportedClocks", "catalog", "lookup"]
