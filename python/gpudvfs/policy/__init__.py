"""Choosing frequencies from predicted time and power.

| module     | what                                                                   |
|------------|------------------------------------------------------------------------|
| `policies` | `select` (energy, EDP, ED2P, deadline, power cap) and `pareto_front`    |
| `choose`   | workloads profiled once with nvprof: utilizations, power model, choice |

Their energy regret on measured grids, against baselines, is `gpudvfs.evaluation`'s.
"""

from gpudvfs.policy.policies import POLICIES, Selection, pareto_front, select

__all__ = ["POLICIES", "Selection", "pareto_front", "select"]
