"""One governor decision over a 200-pair grid (20 core x 10 memory clocks), with RLS streams
that have seen a few pairs, against the same decision in numpy (`governor_reference.py`,
what the Rust core replaced), and beside the offline choice on the same predictions
(`gpudvfs.policy`, the model-only decision a governor without measurement makes).

    python benches/bench_govern.py [--repeat N] [--json]
"""

from __future__ import annotations

import argparse
import json

from gpudvfs.govern import Governor
from gpudvfs.policy import select

from _phase import synthetic_phase
from _timing import best_of, report
from governor_reference import NumpyGovernor


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2000)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    configs, top, t, p = synthetic_phase()
    gov, ref = Governor(configs, top), NumpyGovernor(configs, top)
    for g in (gov, ref):
        g.phase("bench", t, p)
        for k in (top, 150, 120, 90):  # a phase a few steps in
            g.observe(k, t[k] * 1.02, p[k] * 0.99)
    if gov.decide() != ref.decide(gov.current):
        raise SystemExit("the Rust and numpy governors decide differently")
    n = a.repeat
    # best_of times one call; a decision is microseconds, so each timed call makes n of them.
    ours = best_of(lambda: [gov.decide() for _ in range(n)], 5) / n
    numpy_s = best_of(lambda: [ref.decide(top) for _ in range(n)], 5) / n
    offline = best_of(lambda: [select(t, p, configs, "energy") for _ in range(n)], 5) / n
    r = report("governor decision, 200 pairs", ours, "the same decision in numpy", numpy_s)
    print(f"one decision: {ours * 1e6:.1f} us (target: 50 us); in numpy {numpy_s * 1e6:.1f} us; "
          f"select() on the same predictions {offline * 1e6:.1f} us")
    if a.json:
        print(json.dumps(r | {"decision_us": ours * 1e6, "select_us": offline * 1e6}))


if __name__ == "__main__":
    main()
