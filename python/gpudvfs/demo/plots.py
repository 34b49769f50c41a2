"""Figures of a demo run: heatmaps over the clock grid, the voltage curves, the Pareto fronts.
Needs matplotlib."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .run import DemoResult, WorkloadResult

# Marker of each policy's choice, in the heatmaps and on the Pareto fronts.
POLICY_MARKERS = {"energy": "*", "edp": "D", "ed2p": "^", "deadline": "s", "power-cap": "P", "cost": "X"}
UNSUPPORTED = "white: a pair the GPU does not support"


def plot_demo(result: DemoResult, out_dir: str | Path) -> list[Path]:
    """Write :func:`demo_figures` as PNG files into ``out_dir``; returns their paths."""
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, fig in demo_figures(result).items():
        written.append(out / f"{name}.png")
        fig.savefig(written[-1], dpi=100)
        plt.close(fig)
    return written


def demo_figures(result: DemoResult) -> dict:
    """file name -> figure: heatmaps of predicted time, power and energy over the clock grid
    per workload; the fitted voltage curves (with the truth on the simulator) beside the
    Pareto fronts."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures = {f"heatmaps-{_slug(r.name)}": _heatmaps(plt, r) for r in result.workloads}
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.6), layout="constrained")
    _voltages(axes[0], axes[1], result)
    _pareto(axes[2], result)
    figures["voltage-and-pareto"] = fig
    return figures


def _heatmaps(plt, r: WorkloadResult):
    """Time, power and energy over core clock x memory clock. Memory clocks are a few
    levels far apart, so each is a row of its own; colours are on a log scale, since the
    lowest memory clock's times run several-fold higher and would flatten the rest."""
    import matplotlib as mpl

    cores, mems = np.unique(r.configs[:, 0]), np.unique(r.configs[:, 1])
    rows, cols = np.searchsorted(mems, r.configs[:, 1]), np.searchsorted(cores, r.configs[:, 0])
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
        ax.set_xlabel("core clock (MHz)")
        ax.set_ylabel("memory clock (MHz)")
        ax.set_title(f"predicted {label}")
        bar = fig.colorbar(im, ax=ax, label=f"{label}, log scale")
        plain = mpl.ticker.FuncFormatter(lambda v, _: f"{v:.3g}")
        bar.ax.yaxis.set_major_formatter(plain)
        bar.ax.yaxis.set_minor_formatter(plain)
        for policy, s in r.choices.items():
            k = int(s.index[0])
            ax.plot(cols[k], rows[k], POLICY_MARKERS[policy], label=f"{policy} choice",
                    **_choice_style(policy, "white"))
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=len(labels), frameon=False)
    fig.suptitle(f"{r.name}  ({UNSUPPORTED})")
    return fig


def _voltages(ax_core, ax_mem, result: DemoResult) -> None:
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
    for ax, name in ((ax_core, "core"), (ax_mem, "memory")):
        ax.set_xlabel(f"{name} clock (MHz)")
        ax.set_ylabel(f"{name} voltage (1 = at the default clocks)")
        ax.set_title(f"{name} voltage ({result.power_model.variant} model)")
        ax.legend(loc="lower right", frameon=False)


def _pareto(ax, result: DemoResult) -> None:
    """Each workload's Pareto front relative to its default clocks, so workloads of any
    length share the axes; each policy's choice is marked."""
    default = int(np.flatnonzero((result.workloads[0].configs == np.asarray(result.reference_mhz)).all(axis=1))[0])
    for i, r in enumerate(result.workloads):
        t, e = r.time_ms / r.time_ms[default], r.joules / r.joules[default]
        ax.plot(t[r.pareto], e[r.pareto], "-", color=f"C{i}", lw=1.5, label=r.name)
        for policy, s in r.choices.items():
            k = int(s.index[0])
            ax.plot(t[k], e[k], POLICY_MARKERS[policy], **_choice_style(policy, f"C{i}"))
    for policy, marker in POLICY_MARKERS.items():
        ax.plot([], [], marker, ls="none", label=f"{policy} choice", **_choice_style(policy, "0.7"))
    ax.axvline(1 + result.slowdown, color="0.5", ls=":", lw=1, label=f"deadline: +{100 * result.slowdown:g}% time")
    ax.plot(1, 1, "o", color="black", ms=4, label="default clocks")
    ax.set_xlabel("predicted time / time at the default clocks")
    ax.set_ylabel("predicted energy / energy at the default clocks")
    ax.set_title("Pareto fronts (time, energy) and the choices")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)


def _choice_style(policy: str, colour: str) -> dict:
    """The minimum-energy choice, the demo's headline, is drawn largest and on top: other
    policies often choose the same pair."""
    top = policy == "energy"
    return {"color": "red" if top and colour == "white" else colour, "mec": "black", "ms": 14 if top else 8,
            "zorder": 4 if top else 3}


def _slug(name: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in name).strip("-").lower()
