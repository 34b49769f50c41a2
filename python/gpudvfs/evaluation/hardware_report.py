"""One pass of the measurement layer over a GPU, for a session with little device time (docs/measuring.md).

`validate` writes into one folder, step by step:

1. ``device.json`` (clocks, power limits, energy counter, the power reading samples use, the
   sensor's inferred refresh period, throttle reasons, whether a clock lock holds, tried once)
   and ``nvidia-smi-q.txt``;
2. ``time-suite.csv``, ``power-suite.csv``: both suites over a coarse grid sized to the budget
   (the default pair only where clocks cannot be set); ``profile=True`` profiles the power
   suite at the default clocks (Nsight Compute, raw CSVs in ``ncu/``);
3. ``power-counter.csv``, ``power-samples.csv``: a few kernels, power from the energy counter
   and from sampled readings side by side;
4. ``apps.csv``: the workloads of `gpudvfs.hardware.apps` over the same grid, profiled;
5. ``models.json``: the time device fitted to the latency suite, the power model to the power
   suite (grouped CV), the time model scored away from the default pair, and on the real
   workloads, which no fit saw, time (against two-term scaling), power and the
   minimum-energy choice's regret;
6. ``predict/<app>.json``: `gpudvfs predict` on each workload's ncu CSV (Nsight Compute only);
7. ``gpm.json``: each workload's SM, pipe and DRAM activity from NVML's GPM (Hopper and newer).

``leave_clocks=True`` (a GPU whose clocks are not this run's to change): nothing is locked,
tried or reset; step 1 reads what setting clocks would need; the sweeps measure each workload
once at the driver's clocks, recorded; step 5 is skipped. ``report.md`` says what each step
found; a failed step is reported and the next runs; sweeps resume where a run stopped.
"""

from __future__ import annotations

import json
import platform
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import numpy as np

from gpudvfs.catalog.clocks import SupportedClocks
from gpudvfs.data.jsonfile import write_json_atomic
from gpudvfs.data.profilers import read_ncu_csv
from gpudvfs.errors import InputError
from gpudvfs.evaluation.power_errors import cross_validate_power
from gpudvfs.evaluation.time_errors import two_term
from gpudvfs.hardware.apps import APPS
from gpudvfs.hardware.calibrate import Progress, base_time_device, catalog_entry, stage
from gpudvfs.hardware.device import Device, Workload
from gpudvfs.hardware.gpm import GpmActivity
from gpudvfs.hardware.nvml import NvmlDevice
from gpudvfs.hardware.simulated import SimulatedDevice
from gpudvfs.hardware.sweep import read_rows, run_sweep, suite_workloads, to_power_dataset, to_time_device
from gpudvfs.hardware.sweep_record import load_record
from gpudvfs.power import PowerModel
from gpudvfs.predict.profile import device_of, predict_detail
from gpudvfs.stats import mape
from gpudvfs.time import KernelProfile, TimeDevice, TimeModel

#: Seconds one measurement costs beyond its own length (clock changes, warm-up launch).
OVERHEAD_S = 0.2
#: Power-suite kernels measured both ways in step 3.
SIDE_BY_SIDE = 6
# Sweeps lock the clocks of each pair, the default one included (a sweep without locks would
# record whatever clocks the driver chose): without the privilege they do not run.
NOT_LOCKABLE = "clocks cannot be locked here (see device.json); sweeps need them"
LEFT = "clocks left to the driver (leave_clocks): the models need several clock pairs"


def coarse_grid(device: Device, n_pairs: int) -> list[tuple[float, float]]:
    """At most ``n_pairs`` (core, memory) MHz pairs spread over a device's grid.

    The default pair first, then core clocks spread evenly (highest and lowest included) at
    the default memory clock and, a third of them, at the lowest memory clock.

    Raises InputError where ``n_pairs`` is under 1.
    """
    if n_pairs < 1:
        raise InputError(f"n_pairs must be >= 1, got {n_pairs}")
    ref = device.default_clocks()
    lowest = min(device.memory_clocks())
    extra = n_pairs - 1
    shares = [(ref[1], extra)] if lowest == ref[1] else [(ref[1], extra - extra // 3), (lowest, extra // 3)]
    pairs = [ref]
    for mem, k in shares:
        cores = [c for c in device.core_clocks(mem) if (c, mem) != ref]
        if k:
            picks = np.unique(np.linspace(0, len(cores) - 1, min(k, len(cores))).round().astype(int))
            pairs += [(cores[i], mem) for i in picks]
    return pairs


def device_view(device: Device, leave_clocks: bool = False) -> dict:
    """What the driver reports about a device, and whether a clock lock holds there.

    Identity, clocks, SM count, energy counter, throttle reasons, power and temperature (a
    query's error where it failed), and ``clock_lock``: what each lock tried gave. With
    ``leave_clocks`` no lock is tried: only what setting clocks would need, where the device says.
    """
    view: dict = {"identity": device.identity(), "default_clocks": list(device.default_clocks()),
                  "sm_count": _ask(device.sm_count), "energy_counter": device.energy_joules() is not None,
                  "throttle_reasons": list(device.throttle_reasons()), "power_w": device.power_watts(),
                  "temperature_c": _ask(device.temperature_c)}
    view["clocks"] = {f"{m:g}": {"count": len(c), "min": min(c), "max": max(c)}
                      for m in device.memory_clocks() for c in [device.core_clocks(m)]}
    for name in ("power_limits", "power_reading", "clock_permissions"):
        attr = getattr(device, name, None)
        if attr is not None:
            view[name] = _ask(attr) if callable(attr) else attr
    view["clock_lock"] = {"not tried": "clocks left to the driver"} if leave_clocks else _try_lock(device)
    return view


def _ask(query: Callable[[], object]) -> object:
    """A query's answer, or the error it raised (a finding too: the SM count needs CuPy)."""
    try:
        return query()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


def _try_lock(device: Device) -> dict:
    """Lock the second-highest core clock at the default memory clock, read back, reset.

    The lowest memory clock is tried too: a separate capability on real GPUs.
    """
    ref = device.default_clocks()
    cores = device.core_clocks(ref[1])
    lowest = min(device.memory_clocks())
    out = {}
    for label, pair in (("core", (cores[min(1, len(cores) - 1)], ref[1])),
                        ("memory", (device.core_clocks(lowest)[0], lowest))):
        try:
            device.lock_clocks(*pair)
            read = getattr(device, "clocks", None)
            out[label] = {"asked": list(pair), "ok": True, "read_back": None if read is None else list(read)}
        except Exception as exc:  # what the driver said is the finding
            out[label] = {"asked": list(pair), "ok": False, "error": f"{type(exc).__name__}: {exc}"}
        finally:
            device.reset_clocks()
    return out


@contextmanager
def sampled_power(device: Device) -> Iterator[bool]:
    """A device with power from sampled readings for the block.

    Yields False where this device has no other source to compare with (nothing changed then).
    """
    # The attribute that chooses the power source, and its value for samples.
    setting: tuple[str, object]
    if isinstance(device, NvmlDevice):
        setting = ("power", "samples")
    elif isinstance(device, SimulatedDevice):
        setting = ("has_energy_counter", False)
    else:
        yield False
        return
    attr, value = setting
    if device.energy_joules() is None:
        yield False
        return
    old = getattr(device, attr)
    setattr(device, attr, value)
    try:
        yield True
    finally:
        setattr(device, attr, old)


class _Steps:
    """Runs each step, records its outcome (and the error of one that failed) and its time."""

    def __init__(self, progress: Progress | None) -> None:
        self.outcomes: dict[str, dict] = {}
        self.progress = progress

    @contextmanager
    def __call__(self, name: str) -> Iterator[dict]:
        record: dict = {}
        start = time.monotonic()
        if self.progress:
            self.progress(name, 0, 1)
        try:
            yield record
            record["ok"] = True
        except Exception as exc:  # reported, and the next step runs
            record.update(ok=False, error=f"{type(exc).__name__}: {exc}")
        record["seconds"] = round(time.monotonic() - start, 1)
        self.outcomes[name] = record
        if self.progress:
            self.progress(name, 1, 1)


def validate(device: Device, out: str | Path, *, budget_s: float = 480.0, min_seconds: float = 0.5,
             power_stride: int = 1, profile: bool = True, resume: bool = False,
             apps: Sequence[Workload] = APPS, progress: Progress | None = None, leave_clocks: bool = False) -> dict:
    """Run the steps of the module notes on a device into ``out``; returns what ``report.md`` says.

    Parameters
    ----------
    budget_s : float
        Seconds the sweeps may take: the grid gets as many pairs as allow both suites and
        ``apps`` at ``min_seconds`` a measurement.
    power_stride : int
        Measure every ``power_stride``-th power kernel.
    profile : bool
        Profile the power suite and the real workloads at the default clocks.
    resume : bool
        Continue the sweeps of an interrupted run in ``out``.
    progress : callable, optional
        Takes (step, done, total).
    leave_clocks : bool
        Set no clock (see the module notes).

    Raises InputError where ``budget_s``, ``min_seconds`` or ``power_stride`` is out of range.
    """
    if not budget_s > 0 or not min_seconds > 0:
        raise InputError(f"budget_s and min_seconds must be > 0, got {budget_s!r}, {min_seconds!r}")
    if power_stride < 1:
        raise InputError(f"power_stride must be >= 1, got {power_stride}")
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    step = _Steps(progress)
    report: dict = {"device": device.name, "host": platform.node(), "simulated": isinstance(device, SimulatedDevice),
                    "steps": step.outcomes}

    with step("device") as r:
        view = device_view(device, leave_clocks)
        write_json_atomic(folder / "device.json", view)
        r["file"] = "device.json"
        report["view"] = view
        if shutil.which("nvidia-smi"):
            q = subprocess.run(["nvidia-smi", "-q"], capture_output=True, text=True, timeout=60)
            (folder / "nvidia-smi-q.txt").write_text(q.stdout + q.stderr, encoding="utf-8")
    locks = report["view"]["clock_lock"].values() if "view" in report else []
    lockable = not leave_clocks and bool(locks) and all(v.get("ok") for v in locks)
    power = suite_workloads("power")[::power_stride]
    timing = suite_workloads("time")
    per_pair = (len(power) + len(timing) + len(apps)) * (min_seconds + OVERHEAD_S)
    n_pairs = max(1, int(0.8 * budget_s // per_pair)) if lockable else 1
    configs = None if leave_clocks else coarse_grid(device, n_pairs)  # None: the driver's clocks
    report["grid"] = {"pairs": [list(c) for c in configs or []], "lockable": lockable, "leave_clocks": leave_clocks,
                      "power_kernels": len(power)}
    can_sweep = lockable or leave_clocks
    sweep = partial(_sweep, device, resume=resume, min_seconds=min_seconds, can_sweep=can_sweep,
                    leave_clocks=leave_clocks)

    if profile and hasattr(device, "ncu_logs"):
        (folder / "ncu").mkdir(exist_ok=True)
        device.ncu_logs = folder / "ncu"
    files = {"time": folder / "time-suite.csv", "power": folder / "power-suite.csv", "apps": folder / "apps.csv"}
    for suite, workloads in (("time", timing), ("power", power)):
        with step(f"{suite} suite") as r:
            sweep(workloads, files[suite], configs, r, profile=profile and suite == "power",
                  progress=stage(progress, f"{suite} suite"))

    with step("power sources") as r:
        if not can_sweep:
            r["skipped"] = NOT_LOCKABLE
        picks = power[:: max(1, len(power) // SIDE_BY_SIDE)][:SIDE_BY_SIDE]
        pair = None if leave_clocks else [device.default_clocks()]
        counter, samples = folder / "power-counter.csv", folder / "power-samples.csv"
        with sampled_power(device) as both:
            both = both and can_sweep
            if both:
                run_sweep(device, picks, samples, configs=pair, resume=resume and samples.exists(),
                          min_seconds=min_seconds, profile=False, leave_clocks=leave_clocks)
        if both:
            run_sweep(device, picks, counter, configs=pair, resume=resume and counter.exists(),
                      min_seconds=min_seconds, profile=False, leave_clocks=leave_clocks)
            report["power_sources"] = _compare_sources(counter, samples)
            r["files"] = [counter.name, samples.name]
        elif can_sweep:
            r["skipped"] = "one power source only"

    with step("real workloads") as r:
        if apps:
            sweep(apps, files["apps"], configs, r, profile=profile, progress=stage(progress, "real workloads"))
        else:
            r["skipped"] = "none given"

    model = None
    with step("models") as r:
        if not lockable:
            r["skipped"] = LEFT if leave_clocks else NOT_LOCKABLE
        else:
            report["models"], model = _fit_and_score(device, files, profile)
            write_json_atomic(folder / "models.json", report["models"])
            r["file"] = "models.json"

    with step("predict from ncu") as r:
        names = {w.name for w in apps}
        logs = sorted((folder / "ncu").glob("*.ncu.csv")) if (folder / "ncu").is_dir() else []
        logs = [f for f in logs if f.name.removesuffix(".ncu.csv") in names]
        if not logs:
            r["skipped"] = "no ncu CSV of a real workload (simulated GPU, or not profiled)"
        else:
            report["predict"] = _predict_logs(logs, folder / "predict", device, model)
            r["files"] = [f"predict/{name}.json" for name, v in report["predict"].items() if "error" not in v]

    with step("GPM activities") as r:
        open_gpm = getattr(device, "gpm", None)
        gpm = open_gpm() if open_gpm is not None and apps else None
        if gpm is None:
            r["skipped"] = "no GPM here (NVML on Hopper and newer)" if apps else "no real workloads given"
        else:
            report["gpm"] = _gpm_activities(device, gpm, apps, min_seconds)
            write_json_atomic(folder / "gpm.json", report["gpm"])
            r["file"] = "gpm.json"

    (folder / "report.md").write_text(render(report), encoding="utf-8")
    write_json_atomic(folder / "report.json", json.loads(json.dumps(report, default=str)))
    return report


def _sweep(device: Device, workloads: Sequence[Workload], f: Path, configs: list[tuple[float, float]] | None,
           record: dict, *, can_sweep: bool, leave_clocks: bool, resume: bool, min_seconds: float, profile: bool,
           progress: Callable[[int, int, str], None]) -> None:
    if not can_sweep:
        record["skipped"] = NOT_LOCKABLE
        return
    res = run_sweep(device, workloads, f, configs=configs, resume=resume and f.exists(), min_seconds=min_seconds,
                    profile=profile, progress=progress, leave_clocks=leave_clocks)
    record.update(file=f.name, measured=res.measured, throttled=res.throttled)
    if leave_clocks:  # which clocks the driver ran the workloads at is a finding
        g = read_rows(f)
        record["clocks_seen"] = {k: [float(v.min()), float(np.median(v)), float(v.max())]
                                 for k, v in (("core_mhz", g.core_mhz), ("mem_mhz", g.mem_mhz))}


def _gpm_activities(device: Device, gpm: GpmActivity, apps: Sequence[Workload], min_seconds: float) -> dict:
    """(SM, pipe, DRAM) activity of each workload over one measurement of it, from GPM."""
    out = {}
    try:
        for w in apps:
            gpm.start()
            m = device.measure(w, min_seconds=min_seconds)
            sm, pipe, dram = (float(x) for x in gpm.read())
            out[w.name] = {"sm": sm, "pipe": pipe, "dram": dram, "core_mhz": m.core_mhz, "watts": m.watts}
    finally:
        gpm.close()
    return out


def _compare_sources(counter: Path, samples: Path) -> dict:
    # One measurement per kernel and file: at the default pair, or at the driver's clocks,
    # which may differ between the two runs (each row says which).
    a, b = read_rows(counter), read_rows(samples)
    by = {n: (w, c) for n, c, w in zip(b.workload.tolist(), b.core_mhz, b.watts)}
    rows = [(n, w, *by[n], c) for n, c, w in zip(a.workload.tolist(), a.core_mhz, a.watts) if n in by]
    if not rows:
        raise InputError("no kernel was measured both ways")
    diff = np.array([100.0 * (s / w - 1.0) for _, w, s, _, _ in rows])
    return {"kernels": [{"workload": n, "counter_w": w, "samples_w": s, "counter_core_mhz": cc, "samples_core_mhz": sc}
                        for n, w, s, sc, cc in rows],
            "mean_abs_diff_pct": float(np.abs(diff).mean()), "max_abs_diff_pct": float(np.abs(diff).max())}


def _fit_and_score(device: Device, files: dict[str, Path], profiled: bool) -> tuple[dict, PowerModel | None]:
    """The figures of the models fitted on the sweeps, and the power model (None when nothing was profiled).

    The time device from the latency suite; the power model's grouped cross-validated error
    on the power suite; the time model's calibrated error (each kernel calibrated on its own
    time at the default pair) at the other pairs, on the power-suite kernels and on the real
    workloads, with power and the minimum-energy choice there.
    """
    out: dict = {}
    time_device, fit = to_time_device(files["time"], base_time_device(device, catalog_entry(device)))
    out["time_device"] = {"params": time_device.params(), "fit": fit}
    if not profiled:
        out["power_model"] = out["time_model"] = "not profiled: no utilizations or counters"
        return out, None
    data = to_power_dataset(files["power"])
    model = PowerModel().fit(data)
    folds = min(6, len(data.benchmarks))
    out["power_model"] = {"variant": model.variant, "train_mape": model.train_mape_,
                          "grouped_cv": cross_validate_power(data, folds).to_dict() if folds >= 2 else None}
    out["time_model"] = _score(files["power"], time_device)
    if files["apps"].exists():
        try:
            out["real_workloads"] = _score(files["apps"], time_device, model)
        except Exception as exc:  # the suites' figures stand without it
            out["real_workloads"] = f"{type(exc).__name__}: {exc}"
    return out, model


def _score(sweep: Path, time_device: TimeDevice, power_model: PowerModel | None = None) -> dict | str:
    """Per kernel of a profiled sweep: the time model's and two-term scaling's calibrated MAPE.

    Away from the default pair; with ``power_model``, its power MAPE and the measured energy
    of the pair of least predicted energy over the measured least (regret).
    """
    grid = read_rows(sweep)
    record = load_record(sweep)
    ref = (float(record["reference_mhz"][0]), float(record["reference_mhz"][1]))
    names = np.array(grid.workload.tolist())
    per_kernel, lacking = {}, []
    for name, counters in record["profiles"].items():
        rows = names == name
        at_ref = rows & (grid.core_mhz == ref[0]) & (grid.mem_mhz == ref[1])
        away = rows & ~at_ref
        if not at_ref.any() or not away.any():
            continue
        try:
            prof = KernelProfile.from_counters(name, counters, device=time_device, reference_mhz=ref,
                                               reference_time_ms=float(grid.time_ms[at_ref][0]))
        except InputError:
            lacking.append(name)  # the profile has utilizations but not the time model's counters
            continue
        # Over the kernel's rows; the time errors over those away from the default pair.
        fc, fm, t, off = grid.core_mhz[rows], grid.mem_mhz[rows], grid.time_ms[rows], away[rows]
        time_ms = TimeModel(time_device).predict(prof, fc, fm, calibrate=True)
        k = {"time_mape": mape(time_ms, t, off),
             "two_term_mape": mape(two_term(prof, time_device, ref, fc, fm), t, off)}
        if power_model is not None:
            w = grid.watts[rows]
            watts = power_model.predict(np.array([counters[c] for c in power_model.components_]), fc, fm)
            regret = t * w / (t * w).min() - 1.0
            k |= {"power_mape": mape(watts, w), "energy_regret_pct": float(100.0 * regret[np.argmin(time_ms * watts)]),
                  "default_regret_pct": float(100.0 * regret[~off][0]), "pairs": int(rows.sum())}
        per_kernel[name] = k
    if not per_kernel:
        return (f"no kernel with the time model's counters measured away from the default pair "
                f"({len(lacking)} profiles lack the counters)")
    mean = {key: float(np.mean([k[key] for k in per_kernel.values()]))
            for key in next(iter(per_kernel.values())) if key != "pairs"}
    return {"kernels": len(per_kernel), **mean,
            "beats_two_term": sum(k["time_mape"] < k["two_term_mape"] for k in per_kernel.values()),
            "per_kernel": per_kernel, "without_counters": lacking}


def _predict_logs(logs: list[Path], folder: Path, device: Device, model: PowerModel | None) -> dict:
    """`gpudvfs predict` on each raw ncu CSV (the profile at the default clocks), over the clocks the GPU lists.

    With the fitted power model where there is one: what each kernel's file gives, or its error.
    """
    folder.mkdir(exist_ok=True)
    out = {}
    for log in logs:
        name = log.name.removesuffix(".ncu.csv")
        try:
            report = read_ncu_csv(log)
            spec = device_of(report, device.name)  # ncu names the GPU by its index and a shared CC
            # The reference is each launch's SM clock as ncu measured it: with the clocks left
            # to the driver, the GPU may boost past its default clocks.
            r = predict_detail(report, spec, power_model=model, clocks=SupportedClocks.of_device(device)).to_dict()
            write_json_atomic(folder / f"{name}.json", r)
            # One pair for the whole workload (a governor sets one per application), and each launch's own.
            out[name] = {"device": spec.key, "kernels": list(r["kernels"]),
                         "application_chosen": r["application"].get("chosen"),
                         "chosen": [k.get("chosen") for k in r["kernels"].values()]}
        except Exception as exc:  # one file's failure is a finding; the others still run
            out[name] = {"error": f"{type(exc).__name__}: {exc}"}
    return out


def _predicted_line(v: dict) -> str:
    """One workload's `predict` outcome.

    Its error, its times alone where no power model was fitted (no pair can be chosen then),
    or the pair chosen for the whole and per launch.
    """
    if "error" in v:
        return f"failed: {v['error']}"
    head = f"{len(v['kernels'])} kernel(s) on {v['device']}"
    if v["application_chosen"] is None:
        return f"{head}, times only: no power model was fitted, so no pair is chosen"
    return f"{head}, chosen for the whole {v['application_chosen']}, per launch {v['chosen']}"


def _span(values: list[float]) -> str:
    return " / ".join(f"{v:g}" for v in values)


def _time_line(score: dict) -> str:
    return (f"{score['time_mape']:.2f}% calibrated MAPE over {score['kernels']} kernels (two-term scaling "
            f"{score['two_term_mape']:.2f}%, beaten on {score['beats_two_term']})")


def render(report: dict) -> str:
    """The Markdown of ``report.md`` from what `validate` returned: one section per step."""
    lines = [f"# gpudvfs validate: {report['device']}", "",
             "Written by `gpudvfs validate`; the raw files are beside this report.", ""]
    view = report.get("view")
    if view:
        lines += ["## What the driver reports", "",
                  f"- default clocks {view['default_clocks'][0]:g} / {view['default_clocks'][1]:g} MHz; "
                  f"SMs: {view['sm_count']}; energy counter: {'yes' if view['energy_counter'] else 'no'}",
                  f"- power samples read: {view.get('power_reading', 'n/a')}; power limits (W): "
                  f"{view.get('power_limits', 'n/a')}",
                  "- memory clocks (core clocks each): "
                  + ", ".join(f"{m} ({c['count']}: {c['min']:g}-{c['max']:g})" for m, c in view["clocks"].items()),
                  f"- throttle reasons at the start: {view['throttle_reasons'] or 'none'}"]
        if "clock_permissions" in view:
            lines.append(f"- setting clocks would need (read, not tried): {view['clock_permissions']}")
        for label, lock in view["clock_lock"].items():
            if not isinstance(lock, dict):
                lines.append(f"- locking clocks: {label} ({lock})")
                continue
            asked = f"{lock['asked'][0]:g}/{lock['asked'][1]:g} MHz"
            lines.append(f"- locking {label} clock ({asked}): " + (
                f"held, read back {lock['read_back']}" if lock["ok"] else f"refused: {lock['error']}"))
        lines.append("")
    grid = report.get("grid")
    if grid and grid.get("leave_clocks"):
        lines += ["## Sweeps", "", f"Clocks left to the driver: each workload measured once at the clocks it ran at "
                  f"(min / median / max MHz per sweep below); {grid['power_kernels']} power kernels.", ""]
        lines += [f"- {name}: core {_span(seen['core_mhz'])}, memory {_span(seen['mem_mhz'])}"
                  for name, r in report["steps"].items() for seen in [r.get("clocks_seen")] if seen]
        lines.append("")
    elif grid:
        lockable = "clocks lockable" if grid["lockable"] else "clocks not lockable: default pair only"
        pairs = ", ".join(f"{c:g}/{m:g}" for c, m in grid["pairs"])
        lines += ["## Sweeps", "", f"{len(grid['pairs'])} clock pair(s) ({lockable}): {pairs}; "
                  f"{grid['power_kernels']} power kernels.", ""]
    src = report.get("power_sources")
    if src:
        lines += ["## Power: energy counter and samples", "",
                  "| kernel | counter (W) | samples (W) | core MHz (counter / samples) |", "|---|---|---|---|"]
        lines += [f"| {k['workload']} | {k['counter_w']:.1f} | {k['samples_w']:.1f} | "
                  f"{k['counter_core_mhz']:g} / {k['samples_core_mhz']:g} |" for k in src["kernels"]]
        lines += ["", f"Mean |difference| {src['mean_abs_diff_pct']:.2f}%, max {src['max_abs_diff_pct']:.2f}%.", ""]
    models = report.get("models")
    if models:
        lines += ["## Models fitted on what was measured", ""]
        fit = models["time_device"]["fit"]
        lines.append(f"- time device: {json.dumps(fit, default=str)}")
        pm = models["power_model"]
        if isinstance(pm, dict):
            cv = pm["grouped_cv"]
            lines.append(f"- power model ({pm['variant']}): training MAPE {pm['train_mape']:.2f}%"
                         + (f", {cv['folds']}-fold CV grouped by benchmark {cv['mape']:.2f}%" if cv else ""))
        else:
            lines.append(f"- power model: {pm}")
        tm = models["time_model"]
        lines.append(f"- time model away from the default pair, power-suite kernels: {_time_line(tm)}"
                     if isinstance(tm, dict) else f"- time model: {tm}")
        lines.append("")
        real = models.get("real_workloads")
        if isinstance(real, dict):
            lines += ["## Real workloads (no fit saw them)", ""]
            if report.get("simulated"):
                lines += ["On the simulated GPU a workload's time comes from the time model itself: these "
                          "figures check the plumbing, not the model.", ""]
            lines += [f"Time model {_time_line(real)}; power {real['power_mape']:.2f}% MAPE; minimum-energy "
                      f"choice {real['energy_regret_pct']:.2f}% over the measured least energy (mean; the default "
                      f"clocks {real['default_regret_pct']:.2f}%).", "",
                      "| workload | time % | two-term % | power % | energy regret % | default clocks' % |",
                      "|---|---|---|---|---|---|"]
            lines += [f"| {n} | {k['time_mape']:.2f} | {k['two_term_mape']:.2f} | {k['power_mape']:.2f} | "
                      f"{k['energy_regret_pct']:.2f} | {k['default_regret_pct']:.2f} |"
                      for n, k in real["per_kernel"].items()]
            lines.append("")
        elif real is not None:
            lines += ["## Real workloads", "", str(real), ""]
    predicted = report.get("predict")
    if predicted:
        lines += ["## `gpudvfs predict` on the real workloads' ncu CSVs", ""]
        lines += [f"- {n}: {_predicted_line(v)}" for n, v in predicted.items()]
        lines.append("")
    gpm = report.get("gpm")
    if gpm:
        lines += ["## GPM activities of the real workloads", "", "| workload | SM | pipe | DRAM | core MHz | W |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {n} | {a['sm']:.2f} | {a['pipe']:.2f} | {a['dram']:.2f} | {a['core_mhz']:g} | {a['watts']:.1f} |"
                  for n, a in gpm.items()]
        lines.append("")
    lines += ["## Steps", "", "| step | outcome | seconds |", "|---|---|---|"]
    for name, r in report["steps"].items():
        outcome = "ok" if r["ok"] else f"failed: {r['error']}"
        if r.get("skipped"):
            outcome = f"skipped: {r['skipped']}"
        lines.append(f"| {name} | {outcome} | {r['seconds']} |")
    return "\n".join(lines) + "\n"
