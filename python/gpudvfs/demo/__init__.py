"""The end-to-end job (`gpudvfs demo`): sweep, fit, profile, choose; its figures and its report."""

from gpudvfs.demo.plots import demo_figures, plot_demo
from gpudvfs.demo.report import demo_report, demo_summary
from gpudvfs.demo.run import DemoResult, WorkloadResult, run_demo

__all__ = ["DemoResult", "WorkloadResult", "demo_figures", "demo_report", "demo_summary", "plot_demo", "run_demo"]
