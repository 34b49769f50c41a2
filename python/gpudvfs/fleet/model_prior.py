"""A daemon phase's prior from a GPU's fleet registry power model and the DCGM time model.

The phase's first interval carried to every pair as `gpudvfs fleet whatif` carries a telemetry
sample: its power by the GPU's registry model, its time by the time model's shares. Implements
`gpudvfs.govern.priors.Prior`.
"""

from __future__ import annotations

import numpy as np

from gpudvfs.fleet.whatif import GpuTable, Samples, predict_samples
from gpudvfs.govern.governor import MODEL_PRIOR_SD
from gpudvfs.time.dcgm import DcgmTimeModel


class ModelPrior:
    """The pairs of ``table`` (`fleet.whatif.gpu_table`), a phase's curves from ``model``.

    The power model is taken over the GPU's calibrated pairs. Where the time model was fitted at
    one memory clock, only the default memory clock's pairs are governed.
    """

    name, knob = "models", "clocks"
    prior_sd = MODEL_PRIOR_SD

    def __init__(self, table: GpuTable, model: DcgmTimeModel) -> None:
        cfg = table.configs
        keep = np.ones(len(cfg), dtype=bool) if model.varies_mem_ else cfg[:, 1] == cfg[table.default, 1]
        self.pairs = np.flatnonzero(keep)
        self.table, self.model = table, model
        self.configs = cfg[self.pairs]
        self.default_index = int(np.searchsorted(self.pairs, table.default))

    def __call__(self, watts: float, activity: np.ndarray, time_ms: float,
                 clocks: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
        """As `Prior`: time per unit (ms) and watts at each governed pair."""
        one = Samples(np.zeros(1, dtype=np.int64), ["gpu"], np.zeros(1, dtype=np.int64), ["phase"],
                      np.array([watts]), np.array([clocks[0]]), np.array([clocks[1]]), activity[None, :])
        p = predict_samples(one, {"gpu": self.table}, self.model)[0]
        return time_ms * p.ratio[0, self.pairs], p.watts[0, self.pairs]
