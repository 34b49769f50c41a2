"""`gpudvfs power prior`, `prior-cv`, `prior-pipes`, `prior-curve`: a catalog GPU's power model from its public figures.

And the rule behind it scored on GPUs it was not fitted on, its SFU and tensor weights on kernels,
its voltage curve on clock sweeps.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import click

from gpudvfs.catalog import lookup
from gpudvfs.catalog.clocks import RANGE_CORE_CLOCKS, thin
from gpudvfs.cli import options
from gpudvfs.cli.output import console, output_file, print_json, refuse_overwrite, table, user_errors
from gpudvfs.cli.progress import progress_bars
from gpudvfs.data.jsonfile import write_json_atomic
from gpudvfs.power import PowerModel
from gpudvfs.power.prior_curve_fit import choose_curve
from gpudvfs.power.prior_pipes import has_tensor_cores, pipes_document
from gpudvfs.power.prior_pipes_fit import fit_pipes
from gpudvfs.power.prior_rule import choose_rule, gpu_files


@click.command("prior")
@click.argument("device")
@click.option("-o", "--out", type=click.Path(dir_okay=False), callback=output_file,
              help="Write the prior as a power model file (what --power-model and `power observe` read).")
@options.force
@click.option("--json", "as_json", is_flag=True)
def prior(device: str, out: str | None, force: bool, as_json: bool) -> None:
    """The power prior of DEVICE (a catalog GPU), no measurement of it.

    Static, idle and dynamic power and the voltage curve from its TDP and default clocks by the
    catalog's one rule.
    """
    with user_errors():
        spec = lookup(device)
        refuse_overwrite([out], force=force)
        model = PowerModel.prior(spec)
        if out:
            model.save(out)
    assert model.interval_ is not None  # a prior carries its interval
    # The tensor pipe's power at full activity and the default clocks, outside the model's components.
    tensor = pipes_document()["tensor_per_tdp"] * spec.tdp_w if has_tensor_cores(spec) else None
    cores = model.configs_[model.configs_[:, 1] == spec.default_mhz[1], 0]
    v = model.voltage(cores, spec.default_mhz[1])[:, 0]
    if as_json:
        print_json({"device": spec.key, "source": "prior", "reference_mhz": list(model.reference_mhz_),
                    "interval": model.interval_, "static_w": model.static_w_.tolist(), "idle_w": model.idle_w_.tolist(),
                    "weights_w": model.weights_, "tensor_w": tensor, "core_mhz": cores.tolist(),
                    "core_voltage": v.tolist(), "model": out})
        return
    console.print(f"{spec.key}: prior from its {spec.tdp_w:g} W TDP at its default clocks "
                  f"{spec.default_mhz[0]:g}/{spec.default_mhz[1]:g} MHz "
                  f"(90% interval x/{math.exp(model.interval_):.2f})", highlight=False)
    console.print(table("prior power model (W)", ["term", "core", "memory"],
                        [["static", *[f"{x:.1f}" for x in model.static_w_]],
                         ["idle", *[f"{x:.1f}" for x in model.idle_w_]]]
                        + [[f"dynamic {c}", f"{w:.1f}" if c != "DRAM" else "", f"{w:.1f}" if c == "DRAM" else ""]
                           for c, w in model.weights_.items()]
                        + ([["dynamic tensor pipe", f"{tensor:.1f}", ""]] if tensor is not None else [])))
    shown = set(thin(cores, spec.default_mhz[0], RANGE_CORE_CLOCKS))  # a coarse grid, for display
    console.print("core voltage (relative to the default clock): " + ", ".join(
        f"{c:g} MHz {x:.3f}" for c, x in zip(cores, v) if c in shown), highlight=False, soft_wrap=True)
    if out:
        console.print(f"wrote {out}")


@click.command("prior-cv")
@click.argument("data", type=click.Path(file_okay=False, exists=True))
@click.option("--validation", type=click.Path(file_okay=False, exists=True),
              help="A `gpudvfs validate` folder whose power suite is fitted and scored too (an H100's).")
@click.option("--write", "write_to", type=click.Path(dir_okay=False), callback=output_file,
              help="Write the rule fitted on every GPU (the catalog ships it as catalog/power_prior.json).")
@options.force
@click.option("--json", "as_json", is_flag=True)
def prior_cv(data: str, validation: str | None, write_to: str | None, force: bool, as_json: bool) -> None:
    """Fit the power prior's rule on the measured GPUs under DATA, and score it leave-one-GPU-out.

    DATA: the public data folder. Each GPU's prior is made without its own files.
    """
    with user_errors(), progress_bars(disable=as_json) as update:
        refuse_overwrite([write_to], force=force)
        files = gpu_files(Path(data), Path(validation) if validation else None)
        r = choose_rule(files, progress=lambda done, total, label: update("settings", done, total, label))
        if write_to:
            write_json_atomic(write_to, r["rule"])
    if as_json:
        print_json(r)
        return
    cv = r["cv"]
    rows = [[name, f["gpu"], _pct(f.get("mape")), _pct(f.get("median_ape")), _pct(f.get("bias")),
             _pct(f.get("reference_mape")), f["setting"], f["note"]] for name, f in cv["files"].items()]
    console.print(table(f"power prior, each GPU left out, its setting chosen on the other GPUs (mean MAPE "
                        f"{cv['mean_mape']:.2f}%)",
                        ["file", "GPU", "MAPE %", "median %", "bias %", "shape MAPE %", "setting", "note"], rows))
    console.print(f"90% of the held-out predictions within a factor {math.exp(cv['interval']):.2f} of the measured "
                  "power (each GPU weighing the same); shape: each workload's measured power at the reference "
                  "clocks scaled by the prior's curve", highlight=False)
    console.print(f"chosen on all GPUs (the shipped rule): {r['chosen']['on_all']}; each setting's leave-one-GPU-out "
                  "mean MAPE: " + ", ".join(f"{k} {v['mean_mape']:.2f}%" for k, v in r["settings"].items()),
                  highlight=False, soft_wrap=True)
    if write_to:
        console.print(f"wrote {write_to}")


@click.command("prior-pipes")
@click.argument("validation", type=click.Path(file_okay=False, exists=True))
@click.option("--write", "write_to", type=click.Path(dir_okay=False), callback=output_file,
              help="Write the weights (the catalog ships them as catalog/power_prior_pipes.json).")
@options.force
@click.option("--json", "as_json", is_flag=True)
def prior_pipes(validation: str, write_to: str | None, force: bool, as_json: bool) -> None:
    """Fit the prior's SFU and tensor weights on the H100 and H200 kernels under VALIDATION, each kernel left out.

    VALIDATION: the folder holding nvidia-h100-80gb-hbm3/ and nvidia-h200/ (the repository's validation/).
    """
    r = _fitted(write_to, force, lambda: fit_pipes(Path(validation) / "nvidia-h100-80gb-hbm3",
                                                    Path(validation) / "nvidia-h200"))
    if as_json:
        print_json(r)
        return
    rows = [[gpu, name, f"{k['watts']:.0f}", f"{100 * (k['before'] / k['watts'] - 1):+.1f}",
             f"{100 * (k['after'] / k['watts'] - 1):+.1f}", f"x/{math.exp(k['interval_before']):.2f}",
             f"x/{math.exp(k['interval_after']):.2f}"] for gpu, ks in r["kernels"].items() for name, k in ks.items()]
    console.print(table("the prior's power at the measured clocks, before and after (each kernel left out)",
                        ["GPU", "kernel", "measured W", "before %", "after %", "interval before", "after"], rows))
    for gpu, s in r["summary"].items():
        console.print(f"{gpu}: MAPE {s['before_mape']:.1f}% -> {s['after_mape']:.1f}%; outside the 90% interval: "
                      f"{', '.join(s['before_outside']) or 'none'} -> {', '.join(s['after_outside']) or 'none'}",
                      highlight=False, soft_wrap=True)
    d = r["document"]
    console.print(f"weights over TDP: SFU {d['sfu_per_tdp']:.3f} (spread {d['sfu_spread']:.3f}), tensor "
                  f"{d['tensor_per_tdp']:.3f} (spread {d['tensor_spread']:.3f})", highlight=False)
    if write_to:
        console.print(f"wrote {write_to}")


@click.command("prior-curve")
@click.argument("data", type=click.Path(file_okay=False, exists=True))
@click.option("--write", "write_to", type=click.Path(dir_okay=False), callback=output_file,
              help="Write the curve chosen on every GPU (the catalog ships it as catalog/power_prior_curve.json).")
@options.force
@click.option("--json", "as_json", is_flag=True)
def prior_curve(data: str, write_to: str | None, force: bool, as_json: bool) -> None:
    """Choose the prior's core voltage floor and knee on the clock sweeps under DATA, each GPU left out.

    DATA: the public data folder. Scored by the energy the prior's least-energy clock costs over
    the measured least (the regret), each workload's power level from its measured reference.
    """
    r = _fitted(write_to, force, lambda: choose_curve(Path(data)))
    if as_json:
        print_json(r)
        return
    rows = [[gpu, f"{g['before']:.2f}", f"{g['after']:.2f}", f"{g['knee']:g}", f"{g['floor']:g}",
             f"{g['after_by_mean']:.2f}", f"{g['prior']:.2f}"] for gpu, g in r["per_gpu"].items()]
    console.print(table("the prior's least-energy regret (%), each GPU left out",
                        ["GPU", "rule's curve", "chosen", "knee", "floor", "by mean", "the prior's"], rows))
    d = r["document"]
    console.print(f"chosen on all GPUs: knee {d['knee']:g} of the default clock, floor {d['floor']:g} of its voltage, "
                  f"for compute capability {d['from_compute_capability']:g} on; "
                  "moved a step: " + "; ".join(f"{k}: " + ", ".join(f"{g} {x:.2f}%" for g, x in v.items())
                                               for k, v in r["moves"].items()), highlight=False, soft_wrap=True)
    if write_to:
        console.print(f"wrote {write_to}")


def _fitted(write_to: str | None, force: bool, fit: Callable[[], dict]) -> dict:
    """``fit()``'s result, its ``document`` written to ``write_to`` (refused before fitting where it exists)."""
    with user_errors():
        refuse_overwrite([write_to], force=force)
        r = fit()
        if write_to:
            write_json_atomic(write_to, r["document"])
    return r


def _pct(x: float | None) -> str:
    return "" if x is None else f"{x:.1f}"
