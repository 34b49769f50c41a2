"""The end-to-end job (`gpudvfs demo`): sweep, fit, profile, choose; and its figures."""

from gpudvfs.demo.plots import demo_figures, plot_demo
from gpudvfs.demo.run import DemoResult, WorkloadResult, run_demo

__all__ = ["DemoResult", "WorkloadResult", "demo_figures", "plot_demo", "run_demo"]
