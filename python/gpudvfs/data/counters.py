r"""Profiler counters -> the models' inputs, per tool and architecture generation, as data tables.

Two targets:

- **time model** (Wang & Chu): the nvprof metric names of the NV-DVFS data
  (`gtx980_time_dev.csv`), :data:`TIME_INPUTS`. :func:`time_model_inputs` turns a parsed Nsight
  Compute (or nvprof, or DCGM) record into a dict under those names, so the time model, which
  consumes nvprof names, takes any of these tools.
- **power model** (Guerreiro et al., Sec. III-B/C): component utilizations U in [0, 1] for
  :data:`COMPONENTS`. The paper defines U of a compute unit as warps issued to it over the warps
  it could take in the *active* cycles (Eq. 8) and U of a memory level as achieved over peak
  bandwidth over the run (Eq. 9), so compute pipes use Nsight Compute's
  ``pct_of_peak_sustained_active`` and memories ``pct_of_peak_sustained_elapsed``.

Each input has an ordered list of recipes (:mod:`.recipes`); the first whose metrics are all
present is used (:class:`Mapped` says which). An input a tool cannot provide at all is listed in ``unmappable``
with the reason and is always None, never a made-up value. An input the tool could provide but
whose metrics the record lacks is *missing*: :func:`time_model_inputs` and
:func:`power_utilizations` raise :class:`MissingCountersError` naming, for every missing input,
the metrics needed and those absent (``missing="none"`` returns None entries instead).
Utilizations outside [0, 1] by more than :data:`COUNTER_UTIL_TOLERANCE` are an error, not clipped.

Schemes (``scheme=``): ``"ncu"`` Nsight Compute metric names of SM >= 7.0 (Volta, Turing, Ampere,
Ada, Hopper, Blackwell); ``"ncu-pascal"`` the 2019 Nsight Compute names on SM 6.x (Pascal);
``"nvprof"`` nvprof metrics (Kepler, Maxwell, Pascal, Volta); ``"dcgm"`` DCGM profiling fields
(Volta and newer), accepted as ``DCGM_FI_PROF_*`` names, ``dcgmi dmon`` column tags or the
nsfcac CSV column names. For a parsed record the scheme is chosen from its tool and compute
capability (:func:`scheme_of`).

Unit conversions: ``%`` / 100; nvprof levels (``Low (2)``, 0-10 scale) / 10; DRAM bytes / 32 =
sectors (a DRAM sector, like an nvprof DRAM transaction, is 32 bytes); counts and ratios as is.

Time model, :data:`TIME_INPUTS` (nvprof name: recipes in order; ``|`` separates alternatives)

| input | ncu (SM >= 7.0) | ncu-pascal (SM 6.x, 2019) | nvprof | dcgm |
|---|---|---|---|---|
| warps | smsp__warps_launched.sum \| launch__grid_size * ceil(launch__block_size / 32) | launch__grid_size * ceil(launch__block_size / 32) | unique_warps_launched \| warps_launched \| warps | unmappable |
| achieved_occupancy | sm__warps_active.avg.pct_of_peak_sustained_active / 100 | sm__active_warps_avg_per_active_cycle_pct / 100 | achieved_occupancy | DCGM_FI_PROF_SM_OCCUPANCY / DCGM_FI_PROF_SM_ACTIVE \| sm_occupancy / sm_active \| SMOCC / SMACT |
| dram_read_transactions | dram__sectors_read.sum \| dram__bytes_read.sum / 32 | dram__read_sectors | dram_read_transactions | unmappable |
| dram_write_transactions | dram__sectors_write.sum \| dram__bytes_write.sum / 32 | dram__write_sectors | dram_write_transactions | unmappable |
| l2_read_transactions | lts__t_sectors_op_read.sum + lts__t_sectors_op_atom.sum + lts__t_sectors_op_red.sum | unmappable | l2_read_transactions | unmappable |
| l2_write_transactions | lts__t_sectors_op_write.sum + lts__t_sectors_op_atom.sum + lts__t_sectors_op_red.sum | unmappable | l2_write_transactions | unmappable |
| shared_load_transactions | l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum | unmappable | shared_load_transactions | unmappable |
| shared_store_transactions | l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum | unmappable | shared_store_transactions | unmappable |
| flop_count_sp | smsp__sass_thread_inst_executed_op_fadd_pred_on.sum + smsp__sass_thread_inst_executed_op_fmul_pred_on.sum + 2 * smsp__sass_thread_inst_executed_op_ffma_pred_on.sum | unmappable | flop_count_sp | unmappable |
| inst_issued | smsp__inst_issued.sum \| sm__inst_issued.sum | smsp__inst_issued_sum | inst_issued | unmappable |
| inst_per_warp | smsp__average_inst_executed_per_warp.ratio \| smsp__inst_executed.sum / smsp__warps_launched.sum \| smsp__inst_executed.sum / (launch__grid_size * ceil(launch__block_size / 32)) \| sm__inst_executed.sum / (launch__grid_size * ceil(launch__block_size / 32)) | smsp__inst_executed_sum / (launch__grid_size * ceil(launch__block_size / 32)) | inst_per_warp | unmappable |

Optional time-model inputs, :data:`TIME_EXTRAS` (added where present, never required)

| input | ncu (SM >= 7.0) | ncu-pascal | nvprof | dcgm |
|---|---|---|---|---|
| inst_fp_64 | smsp__sass_thread_inst_executed_op_dadd_pred_on.sum + smsp__sass_thread_inst_executed_op_dmul_pred_on.sum + smsp__sass_thread_inst_executed_op_dfma_pred_on.sum | unmappable | inst_fp_64 | unmappable |
| global_requests | smsp__inst_executed_op_global_ld.sum + smsp__inst_executed_op_global_st.sum | unmappable | gld_transactions / gld_transactions_per_request + gst_transactions / gst_transactions_per_request | unmappable |
| flop_count_sp_special | 32 * smsp__inst_executed_pipe_xu.sum | unmappable | flop_count_sp_special | unmappable |
| blocks | launch__grid_size | launch__grid_size | unmappable (the launch geometry is printed beside the metrics) | unmappable |
| threads_per_block | launch__block_size | launch__block_size | unmappable | unmappable |
| theoretical_occupancy | sm__maximum_warps_per_active_cycle_pct / 100 | sm__maximum_warps_per_active_cycle_pct / 100 | unmappable | unmappable |
| sm_clock_mhz | smsp__cycles_elapsed.avg.per_second / 1e6 \| sm__cycles_elapsed.avg.per_second / 1e6 | unmappable | unmappable | unmappable |
| inst_fma_heavy_only | max(0, smsp__inst_executed_pipe_fmaheavy.sum - smsp__inst_executed_pipe_fmalite.sum) | unmappable | unmappable | unmappable |

nvprof counts special-function operations per thread, Nsight Compute the XU pipe's warp
instructions: 32 per warp instruction, full warps assumed; on SM >= 7.0 the XU pipe also
runs conversions and some integer operations, all at its rate, which is what the time model
charges them. From GA10x on, FP32 runs on two pipes, FMA-heavy and FMA-light, and integer
multiply-adds on the heavy one alone, at half the FP32 rate: the heavy pipe's warp instructions
beyond the light one's are those (``inst_fma_heavy_only``). The theoretical occupancy
includes the register, shared-memory and barrier limits, which the launch geometry alone does not tell. ``sm_clock_mhz`` is the SM clock the kernel ran at (ncu's
"SM Frequency"): the reference a profile's time belongs to, whatever clock control ncu used.

The ncu <-> nvprof equivalences follow NVIDIA's nvprof-to-Nsight-Compute metric comparison
(e.g. ``l2_read_transactions`` = read + atom + red sectors; ``flop_count_sp`` counts an FMA
twice). Warps from the launch geometry are exact: every block has ceil(threads / 32) warps.
Not mapped for ncu-pascal: the recorded 2019 Pascal metric set has L2 and shared-memory
percentages and byte-labelled shared counts of unclear meaning, no sector/wavefront counts, and
no per-operation FP counts. DCGM samples device-wide activity ratios, not per-kernel counts;
its occupancy is averaged over all cycles, so dividing by SM activity gives the per-active-cycle
occupancy that nvprof's ``achieved_occupancy`` reports.

Power model, :data:`COMPONENTS` (values in [0, 1])

| component | ncu (SM >= 7.0) | ncu-pascal | nvprof | dcgm |
|---|---|---|---|---|
| SP | smsp__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active / 100 \| sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active / 100 | unmappable | single_precision_fu_utilization / 10 * inst_fp_32 / (inst_fp_32 + inst_integer) | DCGM_FI_PROF_PIPE_FP32_ACTIVE \| fp32_active \| FP32A |
| INT | smsp__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active / 100 \| sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active / 100 \| sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active / 100 | unmappable | single_precision_fu_utilization / 10 * inst_integer / (inst_fp_32 + inst_integer) | DCGM_FI_PROF_PIPE_INT_ACTIVE |
| DP | smsp__inst_executed_pipe_fp64.avg.pct_of_peak_sustained_active / 100 \| sm__inst_executed_pipe_fp64.avg.pct_of_peak_sustained_active / 100 \| sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_active / 100 | unmappable | double_precision_fu_utilization / 10 | DCGM_FI_PROF_PIPE_FP64_ACTIVE \| fp64_active \| FP64A |
| SFU | smsp__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active / 100 \| sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active / 100 | unmappable | special_fu_utilization / 10 | unmappable |
| L2 | lts__t_sectors.avg.pct_of_peak_sustained_elapsed / 100 | unmappable | l2_utilization / 10 | unmappable |
| Shared | l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed / 100 | unmappable | shared_utilization / 10 | unmappable |
| DRAM | dram__throughput.avg.pct_of_peak_sustained_elapsed / 100 \| gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed / 100 | (dram__read_pct + dram__write_pct) / 100 | dram_utilization / 10 | DCGM_FI_PROF_DRAM_ACTIVE \| dram_active \| DRAMA |

Caveats, each a documented choice: on SM >= 7.0 FP32 runs on the FMA pipe and integer/logic on
the ALU pipe, which stand for the paper's SP and INT units (the FMA pipe also executes IMAD, the
ALU pipe FP32 compares). nvprof's single-precision FU utilization covers FP32 and integer
instructions together, so it is split by the instruction ratio exactly as the paper's Eq. 10
does; its 0-10 levels quantize U to steps of 0.1. The Pascal raw page has DRAM read/write
percentages of the peak at the measured DRAM clock (``dram__read_bytes_per_sec`` /
(bus bytes * ``dram__frequency``) = ``dram__read_pct``, checked on the recorded file) but no
pipe-level utilizations. DCGM pipe ratios are averaged over elapsed cycles and all SMs (not
active cycles); a power model must be trained and used with counters of the same tool.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gpudvfs.data.profilers.records import KernelCounters
from gpudvfs.data.recipes import (
    BLOCK_SIZE,
    GRID_SIZE,
    Recipe,
    Table,
    eq10_split,
    excess,
    inst_over_launch_warps,
    launch_warps,
    level,
    megahertz,
    percent,
    percent_sum,
    ratio,
    same,
    scaled,
    weighted_sum,
)
from gpudvfs.data.utilization import bound_utilization
from gpudvfs.errors import InputError
from gpudvfs.limits import is_number

TIME_INPUTS = ("warps", "achieved_occupancy", "dram_read_transactions", "dram_write_transactions",
               "l2_read_transactions", "l2_write_transactions", "shared_load_transactions",
               "shared_store_transactions", "flop_count_sp", "inst_issued", "inst_per_warp")
#: Optional time-model inputs: refinements used where a tool reports them, never required.
TIME_EXTRAS = ("inst_fp_64", "global_requests", "blocks", "threads_per_block", "theoretical_occupancy",
               "sm_clock_mhz", "flop_count_sp_special", "inst_fma_heavy_only")
COMPONENTS = ("SP", "INT", "DP", "SFU", "L2", "Shared", "DRAM")
#: How many of COMPONENTS belong to the core domain and to the memory domain.
DOMAIN_SIZES = (6, 1)
SCHEMES = ("ncu", "ncu-pascal", "nvprof", "dcgm")

#: Utilizations within this much outside [0, 1] are counter noise and kept; further is an error.
COUNTER_UTIL_TOLERANCE = 0.01


class MissingCountersError(InputError):
    """Counters needed for some model inputs are absent.

    ``missing`` maps each such input to the metric names it needs that the record lacks.
    """

    def __init__(self, message: str, missing: Mapping[str, tuple[str, ...]]) -> None:
        super().__init__(message)
        self.missing = dict(missing)


def _ncu_flops() -> Recipe:
    op = "smsp__sass_thread_inst_executed_op_{}_pred_on.sum"
    return weighted_sum((1, op.format("fadd")), (1, op.format("fmul")), (2, op.format("ffma")))


def _lts(op: str) -> Recipe:
    names = [f"lts__t_sectors_op_{o}.sum" for o in (op, "atom", "red")]
    return weighted_sum(*((1, n) for n in names))


def _active(pipe_metric: str) -> list[Recipe]:
    """The smsp__ (per sub-partition) metric, then its sm__ twin: the same percentage of peak."""
    return [percent(f"smsp__{pipe_metric}.avg.pct_of_peak_sustained_active"),
            percent(f"sm__{pipe_metric}.avg.pct_of_peak_sustained_active")]


_NO_DCGM_COUNTS = "DCGM samples device-wide activity ratios, not per-kernel counts"
_PASCAL_GAP = "no such count in the 2019 Nsight Compute Pascal metric set"

TIME_TABLES: dict[str, Table] = {
    "ncu": {
        "warps": [same("smsp__warps_launched.sum"), launch_warps()],
        "achieved_occupancy": [percent("sm__warps_active.avg.pct_of_peak_sustained_active")],
        "dram_read_transactions": [same("dram__sectors_read.sum", "sector"),
                                   scaled("dram__bytes_read.sum", 32, "byte")],
        "dram_write_transactions": [same("dram__sectors_write.sum", "sector"),
                                    scaled("dram__bytes_write.sum", 32, "byte")],
        "l2_read_transactions": [_lts("read")],
        "l2_write_transactions": [_lts("write")],
        "shared_load_transactions": [same("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum")],
        "shared_store_transactions": [same("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum")],
        "flop_count_sp": [_ncu_flops()],
        "inst_issued": [same("smsp__inst_issued.sum"), same("sm__inst_issued.sum")],
        "inst_per_warp": [same("smsp__average_inst_executed_per_warp.ratio"),
                          ratio("smsp__inst_executed.sum", "smsp__warps_launched.sum"),
                          inst_over_launch_warps("smsp__inst_executed.sum"),
                          inst_over_launch_warps("sm__inst_executed.sum")],
    },
    "ncu-pascal": {
        "warps": [launch_warps()],
        "achieved_occupancy": [percent("sm__active_warps_avg_per_active_cycle_pct")],
        "dram_read_transactions": [same("dram__read_sectors", "sector")],
        "dram_write_transactions": [same("dram__write_sectors", "sector")],
        "l2_read_transactions": _PASCAL_GAP,
        "l2_write_transactions": _PASCAL_GAP,
        "shared_load_transactions": _PASCAL_GAP,
        "shared_store_transactions": _PASCAL_GAP,
        "flop_count_sp": _PASCAL_GAP,
        "inst_issued": [same("smsp__inst_issued_sum", "inst")],
        "inst_per_warp": [inst_over_launch_warps("smsp__inst_executed_sum")],
    },
    "nvprof": {
        **{name: [same(name)] for name in TIME_INPUTS},
        # The metric first (Pascal on), then the event (every GPU nvprof profiles), then the
        # column of the NV-DVFS-Benchmark grids: required_metrics asks for the first.
        "warps": [same("unique_warps_launched"), same("warps_launched"), same("warps")],
    },
    "dcgm": {
        **{name: _NO_DCGM_COUNTS for name in TIME_INPUTS},
        "achieved_occupancy": [ratio("DCGM_FI_PROF_SM_OCCUPANCY", "DCGM_FI_PROF_SM_ACTIVE"),
                               ratio("sm_occupancy", "sm_active"), ratio("SMOCC", "SMACT")],
    },
}


def _nvprof_requests() -> Recipe:
    names = ("gld_transactions", "gld_transactions_per_request", "gst_transactions", "gst_transactions_per_request")

    def f(v: Sequence[float]) -> float:
        # A kernel without loads (or stores) reports 0 transactions per request.
        return sum(n / per for n, per in (v[:2], v[2:]) if per > 0)

    return Recipe(names, f, "gld_transactions / gld_transactions_per_request + "
                            "gst_transactions / gst_transactions_per_request")


_NVPROF_LAUNCH = "nvprof prints the launch geometry beside its metrics, not as one (pass it as launch=)"

TIME_EXTRA_TABLES: dict[str, Table] = {
    "ncu": {
        "inst_fp_64": [weighted_sum(*((1, f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum")
                                      for op in ("dadd", "dmul", "dfma")))],
        "global_requests": [weighted_sum((1, "smsp__inst_executed_op_global_ld.sum"),
                                         (1, "smsp__inst_executed_op_global_st.sum"))],
        "blocks": [same(GRID_SIZE)],
        "threads_per_block": [same(BLOCK_SIZE)],
        "theoretical_occupancy": [percent("sm__maximum_warps_per_active_cycle_pct")],
        "sm_clock_mhz": [megahertz("smsp__cycles_elapsed.avg.per_second"),
                         megahertz("sm__cycles_elapsed.avg.per_second")],
        "flop_count_sp_special": [weighted_sum((32, "smsp__inst_executed_pipe_xu.sum"))],
        "inst_fma_heavy_only": [excess("smsp__inst_executed_pipe_fmaheavy.sum", "smsp__inst_executed_pipe_fmalite.sum")],
    },
    "ncu-pascal": {
        "inst_fp_64": _PASCAL_GAP,
        "global_requests": _PASCAL_GAP,
        "blocks": [same(GRID_SIZE)],
        "threads_per_block": [same(BLOCK_SIZE)],
        "theoretical_occupancy": [percent("sm__maximum_warps_per_active_cycle_pct")],
        "sm_clock_mhz": "the recorded 2019 Pascal metric set has no clock rate",
        "flop_count_sp_special": _PASCAL_GAP,
        "inst_fma_heavy_only": _PASCAL_GAP,
    },
    "nvprof": {
        "inst_fp_64": [same("inst_fp_64")],
        "global_requests": [_nvprof_requests()],
        "blocks": _NVPROF_LAUNCH,
        "threads_per_block": _NVPROF_LAUNCH,
        "theoretical_occupancy": "nvprof has no theoretical-occupancy metric",
        "sm_clock_mhz": "nvprof records no clock rate",
        "flop_count_sp_special": [same("flop_count_sp_special")],
        "inst_fma_heavy_only": "nvprof has no per-pipe instruction count",
    },
    "dcgm": {name: _NO_DCGM_COUNTS for name in TIME_EXTRAS},
}

_NO_DCGM_FIELD = "DCGM has no activity field for this unit"
_PASCAL_NO_PIPE = "the 2019 Pascal raw page has no utilization metric for this unit"

POWER_TABLES: dict[str, Table] = {
    "ncu": {
        "SP": [percent("smsp__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"),
               percent("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active")],
        "INT": _active("inst_executed_pipe_alu")
               + [percent("sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active")],
        "DP": _active("inst_executed_pipe_fp64")
              + [percent("sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_active")],
        "SFU": _active("inst_executed_pipe_xu"),
        "L2": [percent("lts__t_sectors.avg.pct_of_peak_sustained_elapsed")],
        "Shared": [percent("l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed")],
        "DRAM": [percent("dram__throughput.avg.pct_of_peak_sustained_elapsed"),
                 percent("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed")],
    },
    "ncu-pascal": {
        **{c: _PASCAL_NO_PIPE for c in COMPONENTS},
        "DRAM": [percent_sum("dram__read_pct", "dram__write_pct")],
    },
    "nvprof": {
        "SP": [eq10_split("single_precision_fu_utilization", "inst_fp_32", "inst_integer", True)],
        "INT": [eq10_split("single_precision_fu_utilization", "inst_integer", "inst_fp_32", False)],
        "DP": [level("double_precision_fu_utilization")],
        "SFU": [level("special_fu_utilization")],
        "L2": [level("l2_utilization")],
        "Shared": [level("shared_utilization")],
        "DRAM": [level("dram_utilization")],
    },
    "dcgm": {
        "SP": [same("DCGM_FI_PROF_PIPE_FP32_ACTIVE"), same("fp32_active"), same("FP32A")],
        "INT": [same("DCGM_FI_PROF_PIPE_INT_ACTIVE")],
        "DP": [same("DCGM_FI_PROF_PIPE_FP64_ACTIVE"), same("fp64_active"), same("FP64A")],
        "SFU": _NO_DCGM_FIELD,
        "L2": _NO_DCGM_FIELD,
        "Shared": _NO_DCGM_FIELD,
        "DRAM": [same("DCGM_FI_PROF_DRAM_ACTIVE"), same("dram_active"), same("DRAMA")],
    },
}


@dataclass
class Mapped:
    """The result of mapping one record.

    ``values`` holds None where an input is not available; ``formulas`` the formula used for
    each computed input; ``missing`` the inputs whose metrics the record lacks, with those
    metrics; ``undefined`` those whose metrics are present but whose formula has no value (e.g.
    0/0); ``unmappable`` those the tool cannot provide, with the reason.
    """

    scheme: str
    values: dict[str, float | None]
    formulas: dict[str, str] = field(default_factory=dict)
    missing: dict[str, tuple[str, ...]] = field(default_factory=dict)
    undefined: dict[str, str] = field(default_factory=dict)
    unmappable: dict[str, str] = field(default_factory=dict)


Counters = KernelCounters | Mapping[str, float]


def scheme_of(counters: Counters) -> str:
    """The scheme of a parsed record's tables: its tool, and for Nsight Compute its compute capability.

    ``ncu-pascal`` on SM 6.x, else ``ncu`` (also where the compute capability is unknown).
    Raises `InputError` for a plain mapping (give ``scheme=``), an unknown tool or an unreadable
    compute capability.
    """
    if not isinstance(counters, KernelCounters):
        raise InputError("give scheme= (one of " + ", ".join(SCHEMES) + ") for a plain mapping of counters")
    if counters.tool == "nvprof":
        return "nvprof"
    if counters.tool != "ncu":
        raise InputError(f"kernel {counters.name!r}: unknown tool {counters.tool!r}; give scheme=")
    cc = recorded_compute_capability(counters)
    if cc is None:
        return "ncu"
    try:
        major = float(cc.split(".")[0])
    except ValueError:
        raise InputError(f"kernel {counters.name!r}: unreadable compute capability {cc!r}") from None
    return "ncu-pascal" if major < 7 else "ncu"


def recorded_compute_capability(counters: KernelCounters) -> str | None:
    """The ``"M.m"`` compute capability a record states (Nsight Compute's CC column, else its device attributes); None for nvprof or a trimmed export."""
    if counters.info.get("CC"):
        return counters.info["CC"]
    major = counters.metrics.get("device__attribute_compute_capability_major")
    if major is None:
        return None
    return f"{major:g}.{counters.metrics.get('device__attribute_compute_capability_minor', 0):g}"


def _lookup(counters: Counters, name: str) -> tuple[float | None, str | None]:
    if isinstance(counters, KernelCounters):
        return counters.metrics.get(name), counters.units.get(name)
    value = counters.get(name)
    if value is None:
        return None, None
    if not is_number(value):
        raise InputError(f"counter {name!r} must be a number, got {value!r}")
    return float(value), None


def map_counters(counters: Counters, table: Table, scheme: str) -> Mapped:
    """Apply one table to one record, recording ``scheme`` in the result.

    Raises `InputError` if a counter is not a finite number, or its stated unit is not the one
    its recipe needs.
    """
    out = Mapped(scheme, {})
    for target, recipes in table.items():
        out.values[target] = None
        if isinstance(recipes, str):
            out.unmappable[target] = recipes
            continue
        for recipe in recipes:
            found = [_lookup(counters, n) for n in recipe.needs]
            values = [v for v, _ in found if v is not None]
            if len(values) < len(found):
                continue
            for n, v, (_, unit), want in zip(recipe.needs, values, found, recipe.units or ("",) * len(found)):
                if not math.isfinite(v):
                    raise InputError(f"counter {n!r} is not finite: {v!r}")
                accepted = (want,) if isinstance(want, str) else want
                if want and unit is not None and unit not in accepted:
                    stated = f"is in {unit!r}" if unit else "states no unit (an export without its units row)"
                    raise InputError(f"counter {n!r} {stated}; {target} needs it in {' or '.join(map(repr, accepted))}")
            value = recipe.combine(values)
            out.formulas[target] = recipe.formula
            if value is None:
                out.undefined[target] = recipe.formula
            else:
                out.values[target] = float(value)
            break
        else:
            first = recipes[0]
            out.missing[target] = tuple(n for n in first.needs if _lookup(counters, n)[0] is None)
    return out


def _name(counters: Counters) -> str:
    return f"kernel {counters.name!r}" if isinstance(counters, KernelCounters) else "counters"


def _finish(mapped: Mapped, table: Table, counters: Counters, missing: str,
            what: str) -> dict[str, float | None]:
    if missing not in ("raise", "none"):
        raise InputError(f"missing must be 'raise' or 'none', got {missing!r}")
    lacking = {**mapped.missing, **{t: () for t in mapped.undefined}}
    if lacking and missing == "raise":
        parts = []
        for t in lacking:
            if t in mapped.undefined:
                parts.append(f"{t} (undefined: {mapped.undefined[t]} has no value, e.g. 0/0)")
            else:
                # A missing input is one of recipes (an unmappable one is never missing).
                alts = " | ".join(r.formula for r in table[t] if isinstance(r, Recipe))
                parts.append(f"{t} (needs {alts}; absent: {', '.join(mapped.missing[t])})")
        raise MissingCountersError(
            f"{_name(counters)}: {len(lacking)} {what} cannot be computed from its "
            f"{mapped.scheme} counters: " + "; ".join(parts), mapped.missing)
    return dict(mapped.values)


def time_model_inputs(counters: Counters, scheme: str | None = None, *,
                      missing: str = "raise") -> dict[str, float | None]:
    """The time model's kernel inputs under their nvprof names (:data:`TIME_INPUTS`), plus the :data:`TIME_EXTRAS` found.

    Inputs the tool cannot provide at all (``unmappable`` in :func:`explain`) are always None
    and do not raise: with DCGM only ``achieved_occupancy`` exists. ``scheme`` defaults to the
    record's (:func:`scheme_of`).

    Raises
    ------
    MissingCountersError
        With ``missing="raise"``: every mappable input whose metrics are absent (or whose
        formula is undefined), with the metrics needed; ``missing="none"`` gives None instead.
    InputError
        If the scheme cannot be told or is unknown, or a counter is not a finite number in the
        unit its recipe needs.
    """
    scheme = _scheme(counters, scheme)
    mapped = map_counters(counters, TIME_TABLES[scheme], scheme)
    inputs = _finish(mapped, TIME_TABLES[scheme], counters, missing, "time-model input(s)")
    return inputs | time_model_extras(counters, scheme)


def time_model_extras(counters: Counters, scheme: str | None = None) -> dict[str, float]:
    """The :data:`TIME_EXTRAS` that a record gives; absent ones are left out, nothing raised for them."""
    scheme = _scheme(counters, scheme)
    values = map_counters(counters, TIME_EXTRA_TABLES[scheme], scheme).values
    return {k: v for k, v in values.items() if v is not None}


def power_utilizations(counters: Counters, scheme: str | None = None, *,
                       missing: str = "raise", clip: bool = False) -> dict[str, float | None]:
    """Component utilizations U in [0, 1] for :data:`COMPONENTS` (power model, Eq. 8-10).

    Missing and unmappable components as in :func:`time_model_inputs`. A value outside [0, 1] by
    more than :data:`COUNTER_UTIL_TOLERANCE` raises `InputError`, or with ``clip`` is clipped
    with a warning.
    """
    scheme = _scheme(counters, scheme)
    table = POWER_TABLES[scheme]
    mapped = map_counters(counters, table, scheme)
    known = {c: v for c, v in mapped.values.items() if v is not None}
    far = [c for c, v in known.items() if not -COUNTER_UTIL_TOLERANCE <= v <= 1 + COUNTER_UTIL_TOLERANCE]
    if far:
        bounded = bound_utilization(list(known.values()), list(known), _name(counters), clip=clip,
                                    tolerance=COUNTER_UTIL_TOLERANCE, hint="a ratio (not a percentage) was expected from "
                                    + "; ".join(f"{c} = {mapped.formulas.get(c, '?')}" for c in far))
        mapped.values.update(zip(known, bounded.tolist()))
    return _finish(mapped, table, counters, missing, "utilization(s)")


def explain(counters: Counters, target: str = "time", scheme: str | None = None) -> Mapped:
    """The full mapping result of a record for ``target`` ``time`` or ``power``, nothing raised for missing inputs."""
    if target not in ("time", "power"):
        raise InputError(f"target must be 'time' or 'power', got {target!r}")
    scheme = _scheme(counters, scheme)
    table = (TIME_TABLES if target == "time" else POWER_TABLES)[scheme]
    return map_counters(counters, table, scheme)


def required_metrics(target: str = "time", scheme: str = "ncu") -> list[str]:
    """The metric names of each input's first recipe, each once: what to ask the profiler for.

    ``target`` ``time`` includes the extras.
    """
    if target not in ("time", "power"):
        raise InputError(f"target must be 'time' or 'power', got {target!r}")
    if scheme not in SCHEMES:
        raise InputError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
    tables = [TIME_TABLES[scheme], TIME_EXTRA_TABLES[scheme]] if target == "time" else [POWER_TABLES[scheme]]
    names: dict[str, None] = {}
    for recipes in (r for table in tables for r in table.values()):
        if not isinstance(recipes, str):
            names.update(dict.fromkeys(recipes[0].needs))
    return list(names)


def _scheme(counters: Counters, scheme: str | None) -> str:
    if scheme is None:
        return scheme_of(counters)
    if scheme not in SCHEMES:
        raise InputError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
    return scheme
