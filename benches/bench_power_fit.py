"""Power-model estimation on titanx_micro.csv (6,528 rows, 64 configurations): the Rust
core (gpudvfs.PowerModel) against a straightforward numpy/scipy implementation of the same
algorithm (benches/power_fit_reference.py: scipy's nnls and least_squares), same run.

    python benches/bench_power_fit.py [--data DIR] [--variants per-config,per-domain,default]

The reference takes about 20 s for per-config and 100 s for default on this machine.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

import gpudvfs
from gpudvfs.power.model import _SETTINGS

from _timing import best_of, report
from power_fit_reference import fit_reference


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = Path(__file__).resolve().parents[1]
    ap.add_argument("--data", default=os.environ.get("GPUDVFS_DATA", here.parent / "shared" / "data"))
    ap.add_argument("--variants", default="per-config,per-domain")
    a = ap.parse_args()
    ds = gpudvfs.read_power_dataset(Path(a.data) / "gpupowermodel" / "titanx_micro.csv")
    warnings.simplefilter("ignore", gpudvfs.GpudvfsWarning)
    for variant in a.variants.split(","):
        base, rel, ridge = _SETTINGS[variant]
        t_rust = best_of(lambda variant=variant: gpudvfs.PowerModel(variant).fit(ds), repeat=5)
        model = gpudvfs.PowerModel(variant).fit(ds)
        t0 = time.perf_counter()
        ref = fit_reference(ds.watts, ds.core_mhz, ds.mem_mhz, ds.utilization, ds.domain_sizes,
                            *ds.reference_mhz, variant=base, relative_weighting=rel, ridge=ridge)
        t_ref = time.perf_counter() - t0
        report(f"fit {variant} ({len(ds)} rows, Rust)", t_rust, "numpy/scipy reference", t_ref)
        print(f"  iterations Rust {model.iterations_} / reference {ref['iterations']}; "
              f"SSE Rust {model.sse_:.4f} W^2 / reference {ref['sse']:.4f} W^2")


if __name__ == "__main__":
    main()
