"""Choosing frequencies from predicted time and power.

| module     | what                                                                   |
|------------|------------------------------------------------------------------------|
| `policies` | `select` (energy, EDP, ED2P, deadline, power cap) and `pareto_front`    |
| `choose`   | workloads profiled once with nvprof: utilizations, power model, choice |
| `evaluate` | energy regret on measured grids, against baselines                     |
"""

from gpudvfs.policy.policies import POLICIES, Selection, pareto_front, select

__all__ = ["POLICIES", "Selection", "pareto_front", "select"]
