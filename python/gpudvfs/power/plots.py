"""Figures of a power model: the voltage of each domain over its clock (the paper's Figure 6).

Given measurements, also predicted against measured power. Needs matplotlib.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from gpudvfs.data.datasets import PowerDataset
from gpudvfs.power.model import PowerModel

if TYPE_CHECKING:  # matplotlib is an optional dependency, imported where a figure is drawn
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

DOMAINS = ("core", "memory")
# Up to this many lines get a legend; more are told apart by a colour scale.
MAX_LEGEND = 6


def plot_model(model: PowerModel, path: str | Path, data: PowerDataset | None = None) -> Path:
    """Write :func:`model_figure` to ``path`` (the format follows its suffix) and return it."""
    import matplotlib.pyplot as plt

    fig = model_figure(model, data)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)


def model_figure(model: PowerModel, data: PowerDataset | None = None) -> Figure:
    """Voltage over each domain's clock and, given ``data``, predicted against measured power."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = 3 if data is not None else 2
    fig, axes = plt.subplots(1, panels, figsize=(5.6 * panels, 4.4), layout="constrained")
    for d, ax in enumerate(axes[:2]):
        _voltage_panel(fig, ax, model, d)
    if data is not None:
        _measured_panel(axes[2], model, data)
    return fig


def _voltage_panel(fig: Figure, ax: Axes, model: PowerModel, d: int) -> None:
    """One line per level of the other domain's clock.

    A few levels get distinct colours and markers and a legend beside the axes; many (sixteen core
    levels) are coloured along the clock, with a colour bar. Memory clocks are few and far apart, so
    they sit at evenly spaced categories.
    """
    import matplotlib as mpl

    cfg, v = model.configs_, model.voltages_
    other = 1 - d
    levels = np.unique(cfg[:, other])
    own = np.unique(cfg[:, d])
    categorical = d == 1
    x_of = {c: i for i, c in enumerate(own)} if categorical else {c: c for c in own}
    few = len(levels) <= MAX_LEGEND
    norm = mpl.colors.Normalize(levels.min(), levels.max()) if not few else None
    cmap = mpl.colormaps["viridis"]
    for k, level in enumerate(levels):
        sel = cfg[:, other] == level
        order = np.argsort(cfg[sel, d])
        colour = f"C{k}" if norm is None else cmap(norm(level))
        ax.plot([x_of[c] for c in cfg[sel, d][order]], v[sel, d][order], marker="os^Dv<>p"[k % 8], ms=4,
                lw=1.2, color=colour, label=f"{DOMAINS[other]} {level:g} MHz")
    if categorical:
        ax.set_xticks(range(len(own)), [f"{c:g}" for c in own])
    ax.axhline(1.0, color="0.6", lw=0.8, ls=":")
    ax.set_xlabel(clock_label(DOMAINS[d], own, categorical))
    ax.set_ylabel(f"{DOMAINS[d]} voltage (1 = at the reference clocks)")
    ax.set_title(f"{DOMAINS[d]} voltage, {model.variant} model")
    if few:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)
    else:
        bar = fig.colorbar(mpl.cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax, pad=0.02)
        bar.set_label(f"{DOMAINS[other]} clock (MHz)")


def clock_label(domain: str, clocks: ArrayLike, categorical: bool) -> str:
    """The label of an axis of clocks (MHz) of ``domain`` (``core`` or ``memory``).

    One drawn as evenly spaced levels (``categorical``) says so where their real spacing is
    uneven, so no one reads distances off it.
    """
    steps = np.diff(np.unique(clocks))
    uneven = categorical and steps.size > 1 and not np.allclose(steps, steps[0])
    return f"{domain} clock (MHz" + (", levels not to scale)" if uneven else ")")


def _measured_panel(ax: Axes, model: PowerModel, data: PowerDataset) -> None:
    pred = model.predict(data.utilization, data.core_mhz, data.mem_mhz)
    ax.scatter(data.watts, pred, s=5, alpha=0.4, edgecolors="none")
    lim = [min(data.watts.min(), pred.min()), max(data.watts.max(), pred.max())]
    ax.plot(lim, lim, "k--", lw=1, label="predicted = measured")
    ax.set_xlabel("measured power (W)")
    ax.set_ylabel("predicted power (W)")
    ape = 100 * np.mean(np.abs(pred - data.watts) / data.watts)
    ax.set_title(f"{Path(data.path).name}: MAPE {ape:.2f}% ({len(data)} rows)")
    ax.legend(loc="upper left", frameon=False)
