"""Observe, then predict, on a recorded run.

Each kernel's power from its Nsight Compute profile by a model `power observe` refined without
that kernel's windows, beside the catalog prior's, against its measured power (`gpudvfs.evaluation.observe_chain`).

    python3 validation/observe_chain.py validation/nvidia-h200/observe-varied validation/nvidia-h200/kernels
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

from gpudvfs.evaluation.observe_chain import chain_table


def main(observed: Path, kernels: Path) -> None:
    """Print the table: ``observed`` holds readings.csv and load.json, ``kernels`` NAME.ncu.csv and NAME.power.json."""
    rows = chain_table(observed / "readings.csv", observed / "load.json", kernels)
    print("| kernel | clock (MHz) | measured (W) | observed model (W) | error | 90% interval | prior (W) | error "
          "| 90% interval | windows left out |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r.kernel} | {r.core_mhz:g} | {r.measured_w:.0f} | {r.observed_w:.0f} | "
              f"{100 * (r.observed_w / r.measured_w - 1):+.1f}% | {_span(r.observed_w, r.observed_q, r.measured_w)} | "
              f"{r.prior_w:.0f} | {100 * (r.prior_w / r.measured_w - 1):+.1f}% | "
              f"{_span(r.prior_w, r.prior_q, r.measured_w)} | {r.windows_left_out} |")
    for name, mape in (("observed", sum(abs(r.observed_w / r.measured_w - 1) for r in rows)),
                       ("prior", sum(abs(r.prior_w / r.measured_w - 1) for r in rows))):
        print(f"{name}: {100 * mape / len(rows):.1f}% MAPE")
    print("\nThe activities mapped from each profile, those read over its windows, and the observed model on those:")
    for r in rows:
        print(f"{r.kernel}: mapped {', '.join(f'{a:.2f}' for a in r.mapped)}; read "
              f"{', '.join(f'{a:.2f}' for a in r.read)}: {100 * (r.as_read_w / r.measured_w - 1):+.1f}%")
    for gap in dict.fromkeys(g for r in rows for g in r.gaps):
        print(f"mapped with: {gap}")


def _span(watts: float, q: float, measured: float) -> str:
    """The interval in watts, and whether it holds the measured power."""
    lo, hi = watts * math.exp(-q), watts * math.exp(q)
    return f"{lo:.0f}-{hi:.0f}" + ("" if lo <= measured <= hi else " (misses)")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
