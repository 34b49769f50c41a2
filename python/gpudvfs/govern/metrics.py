"""Prometheus metrics of a governor (the `govern` extra: prometheus-client), fed by its decision log.

Pass ``GovernorMetrics(...).record`` as the governor's ``log``, and serve the registry
(`GovernorMetrics.serve`).
"""

from __future__ import annotations

from typing import Any

from gpudvfs.errors import InputError


class GovernorMetrics:
    """A governor's decisions as Prometheus gauges and counters.

    Gauges: the clocks, the last observed power and time per unit of work, the energy per unit,
    and the predicted and realized savings against the default clocks; counters: decisions, clock
    changes, explorations.

    ``registry`` None: one of their own; ``labels``: constant labels of every metric (e.g. the GPU).
    `InputError` where prometheus-client is not installed.
    """

    def __init__(self, registry: Any = None, namespace: str = "gpudvfs_governor",
                 labels: dict[str, str] | None = None) -> None:
        try:
            from prometheus_client import CollectorRegistry, Counter, Gauge
        except ImportError:
            raise InputError("governor metrics need prometheus-client: pip install 'gpudvfs[govern]'") from None
        self.registry = registry if registry is not None else CollectorRegistry()
        names = sorted(labels or {})
        self._labels = [labels[n] for n in names] if labels else []

        def make(kind: type, name: str, doc: str) -> Any:
            metric = kind(name, doc, names, namespace=namespace, registry=self.registry)
            return metric.labels(*self._labels) if names else metric

        self.core_mhz = make(Gauge, "core_mhz", "Core clock the governor chose")
        self.mem_mhz = make(Gauge, "mem_mhz", "Memory clock the governor chose")
        self.watts = make(Gauge, "watts", "Power of the last observed interval")
        self.time_ms = make(Gauge, "time_ms", "Time per unit of work of the last observed interval")
        self.energy = make(Gauge, "energy_per_unit_mj", "Energy per unit of work of the last observed interval (mJ)")
        self.predicted = make(Gauge, "predicted_saving", "Energy saving the chosen pair is predicted to make "
                                                         "against the default clocks (fraction)")
        self.realized = make(Gauge, "realized_saving", "Energy saving the last observed interval made against the "
                                                       "default clocks' estimate (fraction)")
        self.decisions = make(Counter, "decisions", "Decisions taken")
        self.changes = make(Counter, "clock_changes", "Decisions that changed the clocks")
        self.explorations = make(Counter, "explorations", "Decisions that explored an unmeasured pair")

    def serve(self, port: int) -> None:
        """Serve the registry over HTTP (``/metrics``) on ``port``.

        From a thread that lives as long as the process.
        """
        from prometheus_client import start_http_server

        start_http_server(port, registry=self.registry)

    def record(self, entry: dict) -> None:
        """Count one entry of the governor's decision log."""
        self.core_mhz.set(entry["core_mhz"])
        self.mem_mhz.set(entry["mem_mhz"])
        self.predicted.set(entry["predicted_saving"])
        self.decisions.inc()
        if entry["changed"]:
            self.changes.inc()
        if entry["explored"]:
            self.explorations.inc()
        obs = entry.get("observed")
        if obs is not None:
            self.watts.set(obs["watts"])
            if obs["time_ms"] is not None:  # None: a daemon that measures no work done
                self.time_ms.set(obs["time_ms"])
                self.energy.set(obs["time_ms"] * obs["watts"] / 1e3)
                if "realized_saving" in entry:  # absent from a dry run's entries: nothing was set
                    self.realized.set(entry["realized_saving"])
