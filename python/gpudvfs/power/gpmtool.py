"""gpmTOOL model files (hpc-ulisboa/gpupowermodel, `gpmTOOL -o`), read into model state.

```
2                            domains
975,3505                     reference MHz
6,1                          components per domain
SP,...,DRAM                  component names
595,785,975,1164             core clocks
810,3300,3505,4005           memory clocks
s_c,s_m,i_c,i_m,w_1..w_n     coefficients, frequencies in MHz
v1 (HPCA'18):  one line per memory clock, a core voltage per core clock
v2 (TPDS'19):  one line of core voltages per core clock, one of memory voltages per memory clock
```
gpmTOOL's README names the four constants "beta0, beta1, beta2, beta3" (the paper's
order: static core, idle core, static memory, idle memory), but the values in its example
files only make sense as static core, static memory, idle core, idle memory: read that
way, the v2 example's idle terms are 21 W and 22 W at the reference clocks instead of a
36 kW core idle term, and the v1 example predicts its own training set
(`titanx_hpca18_micro.csv`) with 4.6% MAPE instead of 11.4%. gpmTOOL's equations take the
frequency in MHz; gpudvfs's take it normalized to the reference, so the idle terms and
weights are multiplied by the reference clock of their domain. A v1 file has no memory
voltages: they are 1 (its model has none).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpudvfs.data.source import Source, csv_line, format_number
from gpudvfs.errors import InputError


def read_gpmtool_model(path: str | Path) -> tuple[tuple[str, ...], dict[str, Any]]:
    """The components' names and the fit's state of a gpmTOOL model file, v1 or v2 layout.

    The state is for `_core.PowerFit.from_state`. Raises `DataFileError` if the file is truncated or
    malformed, not of 2 domains, has negative coefficients, or voltage lines of neither layout.
    """
    src = Source(path)
    rec = dict(src.records(0))
    lines = sorted(rec)

    def row(i: int, n: int | None = None, what: str = "value") -> list[float]:
        if i not in rec:
            raise src.error(f"truncated model file: expected line {i} ({what})", i)
        f = rec[i]
        if n is not None:
            src.expect_fields(f, i, n)
        return [src.number(t, i, j + 1, what) for j, t in enumerate(f)]

    if row(1, 1, "domains") != [2.0]:
        raise src.error("gpmTOOL model files have 2 domains (core, memory)", 1, 1)
    ref = row(2, 2, "reference MHz")
    sizes = [int(x) for x in row(3, 2, "components per domain")]
    if 4 not in rec:
        raise src.error("truncated model file: expected the component names", 4)
    names = tuple(n.strip() for n in rec[4])
    src.expect_fields(rec[4], 4, sum(sizes))
    core, mem = row(5, None, "core MHz"), row(6, None, "memory MHz")
    params = row(7, 4 + sum(sizes), "coefficient")
    if any(p < 0 for p in params):
        raise src.error("coefficients must be >= 0", 7)
    vlines = [i for i in lines if i > 7]
    pairs = [(c, m) for m in mem for c in core]
    levels: list[list[float]]
    level_v: list[list[float]]
    if len(vlines) == len(mem) and all(len(rec[i]) == len(core) for i in vlines):
        # v1: per-configuration core voltages, memory at 1.
        vc = [row(i, len(core), "voltage") for i in vlines]
        volts = [x for j in range(len(mem)) for c in vc[j] for x in (c, 1.0)]
        variant, levels, level_v = "per-config", [[], []], [[], []]
    elif len(vlines) == 2:
        vcore, vmem = row(vlines[0], len(core), "core voltage"), row(vlines[1], len(mem), "memory voltage")
        volts = [x for m in vmem for c in vcore for x in (c, m)]
        variant, levels, level_v = "per-domain", [core, mem], [vcore, vmem]
    else:
        raise src.error(f"expected {len(mem)} lines of {len(core)} core voltages (v1) or a line of "
                        f"{len(core)} core and one of {len(mem)} memory voltages (v2) after line 7",
                        vlines[0] if vlines else 8)
    s_core, s_mem, i_core, i_mem = params[:4]
    w = params[4:]
    state = {
        "variant": variant, "ref_mhz": ref, "domain_sizes": sizes,
        "static_coef": [s_core, s_mem], "idle_coef": [i_core * ref[0], i_mem * ref[1]],
        "weights": [x * ref[0] for x in w[:sizes[0]]] + [x * ref[1] for x in w[sizes[0]:]],
        "configs": [list(p) for p in pairs], "voltages": volts, "on_bound": [False] * len(volts),
        "levels_mhz": levels, "level_voltages": level_v, "curves": None, "folded": [False, False],
        "iterations": 0, "converged": True, "sse": 0.0, "objective": 0.0, "train_mape": 0.0,
        "notes": [f"imported from the gpmTOOL model file {path}"],
    }
    return names, state


def write_gpmtool_model(path: str | Path, names: Sequence[str], state: dict[str, Any]) -> None:
    """Write a fit's state in gpmTOOL's format: v1 layout for a per-config model, v2 for a per-domain one.

    A per-config model's memory voltages must be 1. Raises `InputError` if a per-config model lacks
    a pair of the grid or has memory voltages other than 1, or the model is of another variant.
    """
    ref, sizes = state["ref_mhz"], state["domain_sizes"]
    configs = [tuple(c) for c in state["configs"]]
    core = sorted({c for c, _ in configs})
    mem = sorted({m for _, m in configs})
    volts = dict(zip(configs, zip(state["voltages"][0::2], state["voltages"][1::2])))
    if state["variant"] == "per-config":
        if len(volts) != len(core) * len(mem):
            raise InputError("gpmTOOL model files need every (core, memory) pair of the grid")
        if any(vm != 1.0 for _, vm in volts.values()):
            raise InputError("gpmTOOL v1 model files hold core voltages only; this model has memory voltages != 1")
        vlines = [[volts[(c, m)][0] for c in core] for m in mem]
    elif state["variant"] == "per-domain":
        vlines = [state["level_voltages"][0], state["level_voltages"][1]]
        core, mem = state["levels_mhz"]
    else:
        raise InputError(f"gpmTOOL model files cannot hold a {state['variant']!r} model")
    w = state["weights"]
    params = [state["static_coef"][0], state["static_coef"][1], state["idle_coef"][0] / ref[0],
              state["idle_coef"][1] / ref[1], *[x / ref[0] for x in w[:sizes[0]]],
              *[x / ref[1] for x in w[sizes[0]:]]]
    nums = lambda xs: ",".join(format_number(x) for x in xs)  # noqa: E731
    lines = ["2", nums(ref), nums(sizes), csv_line(names), nums(core), nums(mem), nums(params),
             *[nums(v) for v in vlines]]
    Path(path).write_text("\n".join(lines) + "\n")
