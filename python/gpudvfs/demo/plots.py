"""Figures of a demo run: heatmaps over the clock grid, the voltage curves, the Pareto fronts.

Needs matplotlib, imported when a figure is drawn.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, cast

import numpy as np

from gpudvfs.demo.run import DemoResult, WorkloadResult
from gpudvfs.power.plots import clock_label

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.colorbar import Colorbar
    from matplotlib.figure import Figure

# Marker of each policy's choice, in the heatmaps and on the Pareto fronts.
POLICY_MARKERS = {"energy": "*", "edp": "D", "ed2p": "^", "deadline": "s", "power-cap": "P", "cost": "X"}
UNSUPPORTED = "white: a pair the GPU does not support"
#: Points between the centres of choice markers that share a pair, drawn side by side.
SPREAD_PT = 12.0
DEFAULT_LABEL = "default clocks"
CAP_LABEL = "power cap"


def plot_demo(result: DemoResult, out_dir: str | Path) -> list[Path]:
    """Write :func:`demo_figures` as PNG files into ``out_dir`` (made where missing); returns the files."""
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, fig in demo_figures(result).items():
        written.append(out / f"{name}.png")
        fig.savefig(written[-1], dpi=100)
        plt.close(fig)
    return written


def demo_figures(result: DemoResult) -> dict[str, Figure]:
    """The demo's figures by file name (without suffix).

    Heatmaps of predicted time, power and energy over the clock grid per workload; the fitted
    voltage curves (with the truth on the simulator) beside the Pareto fronts.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures = {f"heatmaps-{_slug(r.name)}": _heatmaps(plt, r, result.reference_mhz, result.power_cap_w)
               for r in result.workloads}
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.6), layout="constrained")
    _voltages(axes[0], axes[1], result)
    _pareto(axes[2], result)
    figures["voltage-and-pareto"] = fig
    return figures


def _heatmaps(plt: ModuleType, r: WorkloadResult, default_mhz: tuple[float, float],
              power_cap_w: float | None = None) -> Figure:
    """Time, power and energy over core clock x memory clock.

    The default clocks ringed, each policy's choice marked and, on the power panel, the power
    cap drawn. Memory clocks are a few levels far apart, so each is a row of its own (the axis
    says so where that is not to scale); colours are on a log scale, since the lowest memory
    clock's times run several-fold higher and would flatten the rest.
    """
    import matplotlib as mpl

    cores, mems = np.unique(r.configs[:, 0]), np.unique(r.configs[:, 1])
    rows, cols = np.searchsorted(mems, r.configs[:, 1]), np.searchsorted(cores, r.configs[:, 0])
    default = np.searchsorted(cores, default_mhz[0]), np.searchsorted(mems, default_mhz[1])
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2), layout="constrained")
    for ax, (label, values) in zip(axes, (("time (ms)", r.time_ms), ("power (W)", r.watts),
                                           ("energy (mJ)", 1e3 * r.joules))):
        img = np.full((len(mems), len(cores)), np.nan)
        img[rows, cols] = values
        im = ax.imshow(img, aspect="auto", origin="lower", cmap="viridis",
                       norm=mpl.colors.LogNorm(values.min(), values.max()))
        step = max(1, len(cores) // 6)
        ax.set_xticks(range(len(cores))[::step], [f"{c:g}" for c in cores[::step]])
        ax.set_yticks(range(len(mems)), [f"{m:g}" for m in mems])
        ax.set_xlabel(clock_label("core", cores, True))
        ax.set_ylabel(clock_label("memory", mems, True))
        ax.set_title(f"predicted {label}")
        bar = fig.colorbar(im, ax=ax, label=f"{label}, log scale")
        plain = mpl.ticker.FuncFormatter(lambda v, _: f"{v:.3g}")
        bar.ax.yaxis.set_major_formatter(plain)
        bar.ax.yaxis.set_minor_formatter(plain)
        if label.startswith("power") and power_cap_w is not None:
            _power_cap(ax, bar, img, power_cap_w)
        ax.plot(*default, "o", mfc="none", mec="black", mew=1.5, ms=18, label=DEFAULT_LABEL)
        _side_by_side(ax, [(cols[int(s.index[0])], rows[int(s.index[0])], policy, "white")
                           for policy, s in r.choices.items()])
    # Each label once, whichever panel drew it (the cap is on the power panel alone).
    found: dict = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            found.setdefault(label, handle)
    fig.legend(list(found.values()), list(found), loc="outside lower center", ncols=len(found), frameon=False)
    fig.suptitle(f"{r.name}  ({UNSUPPORTED})")
    return fig


def _voltages(ax_core: Axes, ax_mem: Axes, result: DemoResult) -> None:
    """The fitted voltage of each domain over its clock; on the simulator, its truth."""
    cfg = result.workloads[0].configs
    v = result.power_model.voltage(cfg[:, 0], cfg[:, 1])
    cores, mems = np.unique(cfg[:, 0]), np.unique(cfg[:, 1])
    first = [int(np.flatnonzero(cfg[:, 0] == c)[0]) for c in cores]
    first_m = [int(np.flatnonzero(cfg[:, 1] == m)[0]) for m in mems]
    ax_core.plot(cores, v[first, 0], "o-", label="fitted")
    ax_mem.plot(range(len(mems)), v[first_m, 1], "o-", label="fitted")
    if result.true_volts is not None:
        ax_core.plot(cores, result.true_volts[first, 0], "k--", label="simulator's truth")
        ax_mem.plot(range(len(mems)), result.true_volts[first_m, 1], "k--", label="simulator's truth")
    ax_mem.set_xticks(range(len(mems)), [f"{m:g}" for m in mems])
    for ax, name, clocks in ((ax_core, "core", cores), (ax_mem, "memory", mems)):
        ax.set_xlabel(clock_label(name, clocks, ax is ax_mem))
        ax.set_ylabel(f"{name} voltage (1 = at the default clocks)")
        ax.set_title(f"{name} voltage ({result.power_model.variant} model)")
        ax.legend(loc="lower right", frameon=False)


def _pareto(ax: Axes, result: DemoResult) -> None:
    """Each workload's Pareto front relative to its default clocks; each policy's choice marked.

    Relative, so that workloads of any length share the axes.
    """
    default = int(np.flatnonzero((result.workloads[0].configs == np.asarray(result.reference_mhz)).all(axis=1))[0])
    choices = []  # of every workload: two workloads' choices may coincide too
    for i, r in enumerate(result.workloads):
        t, e = r.time_ms / r.time_ms[default], r.joules / r.joules[default]
        ax.plot(t[r.pareto], e[r.pareto], "-", color=f"C{i}", lw=1.5, label=r.name)
        picks = [(int(s.index[0]), policy) for policy, s in r.choices.items()]
        choices += [(t[k], e[k], policy, f"C{i}") for k, policy in picks]
        if result.power_cap_w is not None:
            # Relative energy over relative time is power over the default's: the cap is a line
            # through the origin, each workload's own; its pairs under the cap lie below it.
            slope = result.power_cap_w / r.watts[default]  # drawn from (1, slope): the origin would widen the axes
            ax.axline((1, slope), slope=slope, color=f"C{i}", ls="--", lw=0.8,
                      label=f"{CAP_LABEL} {result.power_cap_w:.0f} W (below: under it)" if i == 0 else None)
    _side_by_side(ax, choices, labelled=False)
    for policy, marker in POLICY_MARKERS.items():
        ax.plot([], [], marker, ls="none", label=f"{policy} choice", **_choice_style(policy, "0.7"))
    ax.axvline(1 + result.slowdown, color="0.5", ls=":", lw=1, label=f"deadline: +{100 * result.slowdown:g}% time")
    ax.plot(1, 1, "o", mfc="none", mec="black", mew=1.5, ms=12, label=DEFAULT_LABEL)
    ax.set_xlabel("predicted time / time at the default clocks")
    ax.set_ylabel("predicted energy / energy at the default clocks")
    ax.set_title("Pareto fronts (time, energy) and the choices")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)


def _side_by_side(ax: Axes, choices: Sequence[tuple[float, float, str, str]], labelled: bool = True) -> None:
    """Each (x, y, policy, colour) choice's marker, none hidden under another.

    Those that share a pair are set side by side, shifted in points on the page (their data
    position stays).
    """
    from matplotlib.transforms import offset_copy

    at: dict[tuple, list] = {}
    for x, y, policy, colour in choices:
        at.setdefault((round(float(x), 9), round(float(y), 9)), []).append((policy, colour))
    for (x, y), same in at.items():
        for j, (policy, colour) in enumerate(same):
            shift = offset_copy(ax.transData, fig=cast("Figure", ax.figure), x=(j - (len(same) - 1) / 2) * SPREAD_PT,
                                units="points")
            ax.plot(x, y, POLICY_MARKERS[policy], transform=shift, label=f"{policy} choice" if labelled else None,
                    **_choice_style(policy, colour))


def _power_cap(ax: Axes, bar: Colorbar, img: np.ndarray, cap: float) -> None:
    """The power-cap policy's cap: its level on the colour bar and its contour over the pairs."""
    bar.ax.axhline(cap, color="red", lw=2)
    if np.nanmin(img) < cap < np.nanmax(img):
        ax.contour(np.ma.masked_invalid(img), levels=[cap], colors="red", linewidths=1.5, linestyles="--")
    ax.plot([], [], "--", color="red", label=f"{CAP_LABEL} {cap:.0f} W")


def _choice_style(policy: str, colour: str) -> dict:
    """The minimum-energy choice, the demo's headline, is drawn largest and on top."""
    top = policy == "energy"
    return {"color": "red" if top and colour == "white" else colour, "mec": "black", "ms": 14 if top else 8,
            "zorder": 4 if top else 3}


def _slug(name: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in name).strip("-").lower()
