"""Figures of a demo run: heatmaps over the clock grid, the voltage curve, the Pareto fronts."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .run import DemoResult


def plot_demo(result: DemoResult, out_dir: str | Path) -> list[Path]:
    """Heatmaps of predicted time, power and energy over the clock grid per workload, the
    fitted voltage curves (with the truth on the simulator) and the Pareto fronts."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for r in result.workloads:
        cores, mems = np.unique(r.configs[:, 0]), np.unique(r.configs[:, 1])
        fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
        for ax, (label, values) in zip(axes, (("time (ms)", r.time_ms), ("power (W)", r.watts),
                                               ("energy (J)", r.joules))):
            img = np.full((len(mems), len(cores)), np.nan)
            for (c, m), v in zip(r.configs, values):
                img[np.searchsorted(mems, m), np.searchsorted(cores, c)] = v
            im = ax.imshow(img, aspect="auto", origin="lower", cmap="viridis")
            ax.set_xticks(range(len(cores))[::3], [f"{c:g}" for c in cores[::3]])
            ax.set_yticks(range(len(mems)), [f"{m:g}" for m in mems])
            ax.set_xlabel("core MHz")
            ax.set_ylabel("memory MHz")
            ax.set_title(f"predicted {label}")
            fig.colorbar(im, ax=ax)
        best = r.choices["energy"]
        axes[2].plot(np.searchsorted(cores, best.core_mhz[0]), np.searchsorted(mems, best.mem_mhz[0]), "r*", ms=14)
        fig.suptitle(r.name)
        fig.tight_layout()
        path = out / f"heatmaps-{_slug(r.name)}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    cfg = result.workloads[0].configs
    v = result.power_model.voltage(cfg[:, 0], cfg[:, 1])
    for m in np.unique(cfg[:, 1]):
        sel = cfg[:, 1] == m
        ax1.plot(cfg[sel, 0], v[sel, 0], "o-", label=f"fitted, memory {m:g} MHz")
    if result.true_volts is not None:
        order = np.argsort(cfg[:, 0])
        ax1.plot(cfg[order, 0], result.true_volts[order, 0], "k--", label="simulator's truth")
    ax1.set_xlabel("core MHz")
    ax1.set_ylabel("normalized core voltage")
    ax1.legend(fontsize=7)
    ax1.set_title("voltage curve")
    for r in result.workloads:
        e = r.joules
        ax2.plot(r.time_ms[r.pareto], e[r.pareto], "o-", label=r.name)
    ax2.set_xlabel("predicted time (ms)")
    ax2.set_ylabel("predicted energy (J)")
    ax2.set_title("Pareto fronts (time, energy)")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    path = out / "voltage-and-pareto.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    written.append(path)
    return written


def _slug(name: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in name).strip("-").lower()
