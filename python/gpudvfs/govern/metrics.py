"""Prometheus metrics of a governor (the `govern` extra: prometheus-client), fed by its
decision log: pass ``GovernorMetrics(...).record`` as the governor's ``log``, and serve the
registry (``prometheus_client.start_http_server(port, registry=metrics.registry)``)."""

from __future__ import annotations


class GovernorMetrics:
    """Gauges: the clocks, the last observed power and time per unit of work, the energy per
    unit, and the predicted and realized savings against the default clocks; counters:
    decisions, clock changes, explorations. ``labels``: constant labels (e.g. the GPU)."""

    def __init__(self, registry=None, namespace: str = "gpudvfs_governor", labels: dict[str, str] | None = None):
        try:
            from prometheus_client import CollectorRegistry, Counter, Gauge
        except ImportError:
            from gpudvfs.errors import InputError

            raise InputError("governor metrics need prometheus-client: pip install 'gpudvfs[govern]'") from None
        self.registry = registry if registry is not None else CollectorRegistry()
        names = sorted(labels or {})
        self._labels = [labels[n] for n in names] if labels else []

        def make(kind, name, doc):
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

    def record(self, entry: dict) -> None:
        """One entry of the governor's decision log."""
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
                self.realized.set(entry["realized_saving"])
