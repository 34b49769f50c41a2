"""One governed step through the control loop (`GovernedLoop.step_end`: observe, decide, set, log
entry) against the same step driven on the governor directly (`decide`, `observe`), on a 200-pair
grid (20 core x 10 memory clocks): what the replays, which run thousands of steps through the
loop, pay for it.

    python benches/bench_govern_loop.py [--steps N] [--repeat N] [--json]
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from gpudvfs.govern import Governor
from gpudvfs.govern.loop import GovernedLoop

from _phase import synthetic_phase
from _timing import best_of, report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    configs, top, t, p = synthetic_phase()
    noise = 1 + 0.01 * np.random.default_rng(0).standard_normal((a.steps, 2))
    tt, pp = (t[:, None] * noise[:, 0]).tolist(), (p[:, None] * noise[:, 1]).tolist()  # [K][steps]

    def direct() -> None:
        gov = Governor(configs, top)
        gov.phase("bench", t, p)
        for i in range(a.steps):
            k = gov.decide()
            gov.observe(k, tt[k][i], pp[k][i])

    def looped() -> None:
        loop = GovernedLoop(Governor(configs, top), lambda core_mhz, mem_mhz: None)
        loop.phase("bench", t, p)
        for i in range(a.steps):
            k = loop.held
            assert k is not None
            loop.step_end(time_ms=tt[k][i], watts=pp[k][i])

    # Alternated, each the best of its runs: a shared machine's load falls on both alike.
    times = [[best_of(fn, 1) for fn in (looped, direct)] for _ in range(a.repeat)]
    ours, base = (min(x[j] for x in times) / a.steps for j in (0, 1))
    r = report("a step through GovernedLoop, 200 pairs", ours, "the governor driven directly", base)
    print(f"one step: {ours * 1e6:.1f} us through the loop, {base * 1e6:.1f} us directly (x{ours / base:.2f})")
    if a.json:
        print(json.dumps(r | {"loop_us": ours * 1e6, "direct_us": base * 1e6, "ratio": ours / base}))


if __name__ == "__main__":
    main()
