"""`gpudvfs power prior` and `gpudvfs power prior-cv`: a catalog GPU's power model from its public figures.

And the rule behind it scored on GPUs it was not fitted on.
"""

from __future__ import annotations

import math
from pathlib import Path

import click

from gpudvfs.catalog import lookup
from gpudvfs.catalog.clocks import RANGE_CORE_CLOCKS, thin
from gpudvfs.cli import options
from gpudvfs.cli.output import console, output_file, print_json, refuse_overwrite, table, user_errors
from gpudvfs.cli.progress import progress_bars
from gpudvfs.data.jsonfile import write_json_atomic
from gpudvfs.power import PowerModel
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
    cores = model.configs_[model.configs_[:, 1] == spec.default_mhz[1], 0]
    v = model.voltage(cores, spec.default_mhz[1])[:, 0]
    if as_json:
        print_json({"device": spec.key, "source": "prior", "reference_mhz": list(model.reference_mhz_),
                    "interval": model.interval_, "static_w": model.static_w_.tolist(), "idle_w": model.idle_w_.tolist(),
                    "weights_w": model.weights_, "core_mhz": cores.tolist(), "core_voltage": v.tolist(),
                    "model": out})
        return
    console.print(f"{spec.key}: prior from its {spec.tdp_w:g} W TDP at its default clocks "
                  f"{spec.default_mhz[0]:g}/{spec.default_mhz[1]:g} MHz "
                  f"(90% interval x/{math.exp(model.interval_):.2f})", highlight=False)
    console.print(table("prior power model (W)", ["term", "core", "memory"],
                        [["static", *[f"{x:.1f}" for x in model.static_w_]],
                         ["idle", *[f"{x:.1f}" for x in model.idle_w_]]]
                        + [[f"dynamic {c}", f"{w:.1f}" if c != "DRAM" else "", f"{w:.1f}" if c == "DRAM" else ""]
                           for c, w in model.weights_.items()]))
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


def _pct(x: float | None) -> str:
    return "" if x is None else f"{x:.1f}"
