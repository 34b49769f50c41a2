"""`gpudvfs predict --plot`: a profile's time, power and energy over the GPU's clocks, with the choice."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gpudvfs.predict.profile import PredictionDetail


def plot_prediction(r: PredictionDetail, path: str | Path) -> None:
    """Write a PNG of three panels (time, power, energy of all launches) over the core clock.

    A line per memory clock with its 90% band, and the policy's choice starred. Needs
    matplotlib (the ``plot`` or ``cli`` extra).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    app, q = r.application, r.intervals
    panels = (("time (ms)", app.time_ms, q.time), ("power (W)", app.watts, q.power),
              ("energy (J)", app.joules, q.energy))
    chosen = (r.configs[:, 0] == app.chosen.core_mhz) & (r.configs[:, 1] == app.chosen.mem_mhz)
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2), constrained_layout=True)
    for ax, (label, y, half) in zip(axes, panels):
        y = np.asarray(y, dtype=float)
        for mem in np.unique(r.configs[:, 1]):
            at = np.flatnonzero(r.configs[:, 1] == mem)
            at = at[np.argsort(r.configs[at, 0])]
            line, = ax.plot(r.configs[at, 0], y[at], label=f"memory {mem:g} MHz")
            if half is not None:
                h = np.broadcast_to(np.asarray(half, dtype=float), y.shape)[at]
                ax.fill_between(r.configs[at, 0], y[at] * np.exp(-h), y[at] * np.exp(h), color=line.get_color(),
                                alpha=0.2, linewidth=0)
        ax.plot(r.configs[chosen, 0], y[chosen], "k*", markersize=14,
                label=f"{r.policy}: {app.chosen.core_mhz:g}/{app.chosen.mem_mhz:g} MHz")
        ax.set_xlabel("core clock (MHz)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{r.device}: the profile's {app.launches} launch(es) together at each supported pair "
                 "(90% intervals)")
    fig.savefig(path, dpi=110)
    plt.close(fig)
