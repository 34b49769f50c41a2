"""Counter parsers, the counter -> model-input mapping and the ncu collection side.

Parsers are tested on the real tool outputs in ``<data>/tool-outputs`` (see its README); every
asserted number is printed in those files. Malformed cases are real files with one field
changed. ``run_ncu`` is tested against a stand-in ``ncu`` (a small script put first on PATH that
replays a recorded real ncu file or prints ncu's documented permission error): no GPU and no
Nsight Compute are needed, and the stand-in says nothing about real ncu beyond its file format.
"""

from __future__ import annotations

import csv
import json
import os
import stat
import sys
import time
from pathlib import Path

import pytest

from gpudvfs.data import counters as mapping
from gpudvfs.data.counters import (
    COMPONENTS,
    TIME_INPUTS,
    MissingCountersError,
    explain,
    power_utilizations,
    required_metrics,
    scheme_of,
    time_model_extras,
    time_model_inputs,
)
from gpudvfs.data.profilers import (
    CounterReport,
    ProfilerError,
    SmiLog,
    normalize_unit,
    parse_ncu_csv,
    parse_smi_csv,
    read_counters,
    read_ncu_csv,
    read_nvprof_csv,
    read_smi_csv,
)
from gpudvfs.errors import DataFileError, InputError
from gpudvfs.hardware.ncu import CounterPermissionError, NcuNotFoundError, NcuTimeoutError, ncu_command, run_ncu

FILES = ("ncu_b200_roofline-analysis.csv", "ncu_b200_roofline-analysis_app-error.csv",
         "ncu_rtx5090_llm-perf-opt.csv", "ncu_a100_learningnote4dev.csv",
         "ncu_gtx1080_microgpusim.txt", "nvprof_gtx1080ti_magus.csv",
         "nvprof_gtx1080_microgpusim.txt", "nvidia-smi_h800_cuda-test.csv")


@pytest.fixture
def tools(data: Path) -> Path:
    d = data / "tool-outputs"
    if not d.is_dir():
        pytest.skip(f"real tool outputs not found at {d} (set GPUDVFS_DATA)")
    return d


# ----------------------------------------------------------------------------- units

@pytest.mark.parametrize("unit, factor, base", [
    ("us", 1e3, "ns"), ("nsecond", 1.0, "ns"), ("msecond", 1e6, "ns"), ("second", 1e9, "ns"),
    ("Mbyte", 1e6, "byte"), ("Kbyte", 1e3, "byte"), ("byte", 1.0, "byte"),
    ("GB/s", 2.0**30, "byte/second"), ("MB/s", 2.0**20, "byte/second"), ("B/s", 1.0, "byte/second"),
    ("Gbyte/second", 1e9, "byte/second"), ("cycle/nsecond", 1e9, "cycle/second"),
    ("MiB", 2.0**20, "byte"), ("MHz", 1e6, "Hz"), ("hz", 1.0, "Hz"), ("Minst", 1e6, "inst"),
    ("%", 1.0, "%"), ("W", 1.0, "W"), ("inst/cycle", 1.0, "inst/cycle"), ("", 1.0, ""),
    ("register/thread", 1.0, "register/thread"), ("SM", 1.0, "SM"),
])
def test_unit_table(unit, factor, base):
    assert normalize_unit(unit) == (pytest.approx(factor), base)


# ----------------------------------------------------------------------------- every file

def test_every_tool_output_parses_or_raises_the_documented_error(tools):
    for name in FILES:
        path = tools / name
        if name == "ncu_b200_roofline-analysis_app-error.csv":
            with pytest.raises(ProfilerError) as e:
                read_counters(path)
            assert "==ERROR== The application returned an error code (1)." in str(e.value)
            assert e.value.line == 3
            continue
        result = read_counters(path)
        if name.startswith("nvidia-smi"):
            assert isinstance(result, SmiLog) and result.samples
        else:
            assert isinstance(result, CounterReport) and result.kernels
            assert all(k.metrics for k in result.kernels)


# ----------------------------------------------------------------------------- Nsight Compute

def test_ncu_wide_b200(tools):
    r = read_ncu_csv(tools / "ncu_b200_roofline-analysis.csv")
    assert (r.tool, r.form, len(r.kernels)) == ("ncu", "wide", 16)
    assert [m for _, m in r.messages] == ["==PROF== Connected to process 250292 (/usr/bin/python3.12)",
                                          "==PROF== Disconnected from process 250292"]
    k0, k1 = r.kernels[0], r.kernels[1]
    assert k0.name.startswith("void PersistentVariableLengthMergeStatesKernel<8, 16, 8, 4,")
    assert k1.name.startswith("void BatchDecodeWithPagedKVCacheKernel<0, 2, 1, 8, 16, 4, 2,")
    assert (k0.id, k0.invocation, r.kernels[2].invocation, r.kernels[15].invocation) == (0, 0, 1, 7)
    assert k0.metrics["gpu__time_duration.sum"] == 9920 and k0.units["gpu__time_duration.sum"] == "ns"
    assert k1.metrics["gpu__time_duration.sum"] == 23872
    assert k0.metrics["sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"] == 3.26
    assert k0.units["sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"] == "%"
    assert k1.metrics["sm__inst_issued.sum.per_cycle_active"] == 265.94
    assert k0.metrics["launch__shared_mem_per_block_dynamic"] == 8704
    assert k0.units["launch__shared_mem_per_block_dynamic"] == "byte/block"
    assert k0.text["device__attribute_display_name"] == "NVIDIA B200"
    assert k0.text["launch__cluster_scheduling_policy"] == "PolicySpread"
    assert k0.info["Block Size"] == "(16, 8, 1)" and k0.info["CC"] == "10.0"
    assert r.find("BatchDecode", invocation=3).id == 7


def test_ncu_long_with_rules_and_ragged_rows(tools):
    r = read_ncu_csv(tools / "ncu_rtx5090_llm-perf-opt.csv")
    assert (r.form, len(r.kernels)) == ("long", 1)
    k = r.kernels[0]
    assert "cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<const __nv_bfloat16>" in k.name
    assert k.metrics["dram__bytes_read.sum"] == pytest.approx(2.33e6)  # "2.33" Mbyte
    assert k.units["dram__bytes_read.sum"] == "byte"
    assert k.metrics["dram__bytes_write.sum"] == 0
    assert k.metrics["gpu__time_duration.sum"] == pytest.approx(6750.0)  # "6.75" us
    assert k.metrics["dram__throughput.avg.pct_of_peak_sustained_elapsed"] == 19.66
    assert k.metrics["GPU Speed Of Light Throughput: Duration"] == pytest.approx(6750.0)
    assert k.text["flop_count_sp.sum"] == "n/a" and "flop_count_sp.sum" not in k.metrics
    assert k.metrics["sm__ops_path_tensor_src_bf16_dst_fp32.sum"] == 0
    assert [(x.section, x.name, x.type) for x in k.rules] == [
        ("SpeedOfLight", "SOLBottleneck", "OPT"), ("SpeedOfLight_RooflineChart", "SOLFPRoofline", "INF"),
        ("SchedulerStats", "IssueSlotUtilization", "OPT"), ("Occupancy", "TheoreticalOccupancy", "OPT")]
    assert k.rules[2].speedup == 80.34 and k.rules[2].speedup_type == "local"
    assert k.rules[0].speedup is None
    assert k.info["CC"] == "12.0" and k.info["Grid Size"] == "(224, 1, 1)"


def test_ncu_long_with_error_preamble_and_thousands_separators(tools):
    r = read_ncu_csv(tools / "ncu_a100_learningnote4dev.csv")
    assert [k.name for k in r.kernels] == ["void randomInit<float>(T1 *, int, int, unsigned int)"] * 2 + [
        "void gemm_v0<float>(T1 *, T1 *, T1 *, int, int, int)"]
    assert [k.invocation for k in r.kernels] == [0, 1, 0]
    assert r.errors == [(4, '==ERROR== Failed to profile "gemm_shared_tile" in process 3301344'),
                        (6, "==ERROR== An error occurred while trying to profile.")]
    assert any(t.startswith("==WARNING== Found outstanding GPU clock reset") for _, t in r.messages)
    assert r.kernels[0].metrics["dram__bytes.sum"] == 5_443_677_824.0
    assert r.kernels[1].metrics["dram__bytes.sum"] == 5_552_444_672.0
    gemm = r.find("gemm_v0")
    assert gemm.metrics["smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"] == 34_359_738_368_000.0
    assert gemm.metrics["lts__t_bytes.sum"] == 13_114_550_930_688.0
    assert gemm.metrics["smsp__cycles_elapsed.avg.per_second"] == 764_444_046.88
    assert gemm.units["smsp__cycles_elapsed.avg.per_second"] == "cycle/second"


def test_ncu_2019_pascal_raw_with_app_output_and_lists(tools):
    r = read_ncu_csv(tools / "ncu_gtx1080_microgpusim.txt")
    assert [t for _, t in r.other_lines] == ["grid: (1,1,1)", "threads: (1024,1,1)",
                                             "Final sum = 100.000000; sum/n = 1.000000 (should be ~1)"]
    assert [k.name for k in r.kernels] == ["vecAdd"] * 3 and [k.invocation for k in r.kernels] == [0, 1, 2]
    k = r.kernels[0]
    assert k.info["Kernel Time"] == "2023-Oct-01 02:39:05"
    assert k.metrics["gpu__time_duration"] == 2720 and k.units["gpu__time_duration"] == "ns"
    assert k.metrics["dram__read_bytes"] == 7552 and k.metrics["dram__read_sectors"] == 236
    assert k.metrics["device__attribute_max_gpu_frequency_khz"] == 1_759_000
    assert k.metrics["dram__frequency"] == 5_458_823_529.41 and k.units["dram__frequency"] == "Hz"
    assert k.metrics["smsp__inst_issued_sum"] == 408 and k.metrics["smsp__inst_executed_sum"] == 344
    assert k.lists["memory_access_type"] == (2.0, 2.0, 4.0)
    assert k.lists["thread_inst_executed_true"][:9] == (1024.0,) * 8 + (924.0,)
    assert r.kernels[1].metrics["dram__read_bytes"] == 3264
    # The DRAM percentages are of the peak at the measured DRAM clock (used by the mapping):
    peak = k.metrics["device__attribute_global_memory_bus_width"] / 8 * k.metrics["dram__frequency"]
    assert 100 * k.metrics["dram__read_bytes_per_sec"] / peak == pytest.approx(k.metrics["dram__read_pct"], abs=0.005)


def test_ncu_error_only_file_quotes_the_error(tools):
    with pytest.raises(ProfilerError, match=r"line 3: Nsight Compute reported an error .*"
                       r"'==ERROR== The application returned an error code \(1\)\.'"):
        read_ncu_csv(tools / "ncu_b200_roofline-analysis_app-error.csv")


def _edit(src: Path, dst: Path, line: int, old: str, new: str) -> Path:
    lines = src.read_text().splitlines()
    assert old in lines[line - 1]
    lines[line - 1] = lines[line - 1].replace(old, new, 1)
    dst.write_text("\n".join(lines) + "\n")
    return dst


def test_ncu_malformed_values_are_located(tools, tmp_path):
    src = tools / "ncu_rtx5090_llm-perf-opt.csv"
    bad = _edit(src, tmp_path / "a.csv", 2, '"Mbyte","2.33"', '"Mbyte","2.3x"')
    with pytest.raises(DataFileError) as e:
        read_ncu_csv(bad)
    assert (e.value.line, e.value.column, e.value.problem.column_name) == (2, 15, "dram__bytes_read.sum")
    assert "expected a number in 'Mbyte'" in str(e.value)
    # Metric rows may stop early (ragged) but may not run past the header with content.
    extra = _edit(src, tmp_path / "b.csv", 3, '"byte","0",', '"byte","0",,,,,,"oops"')
    with pytest.raises(DataFileError, match="expected 20 fields, found 21") as e:
        read_ncu_csv(extra)
    assert (e.value.line, e.value.column) == (3, 21)
    wide = tools / "ncu_gtx1080_microgpusim.txt"
    lines = wide.read_text().splitlines()
    fields = next(csv.reader([lines[7]]))[:-1]  # drop the last field of the first kernel row
    lines[7] = ",".join(f'"{f}"' for f in fields)
    (tmp_path / "c.txt").write_text("\n".join(lines))
    with pytest.raises(DataFileError, match="expected 400 fields, found 399") as e:
        read_ncu_csv(tmp_path / "c.txt")
    assert e.value.line == 8
    with pytest.raises(DataFileError, match="no Nsight Compute CSV header"):
        parse_ncu_csv("hello\n==WARNING== No kernels were profiled.\n")


# ----------------------------------------------------------------------------- nvprof

def test_nvprof_summary(tools):
    r = read_nvprof_csv(tools / "nvprof_gtx1080ti_magus.csv")
    assert (r.tool, r.form, len(r.kernels), len(r.messages)) == ("nvprof", "long", 1, 5)
    k = r.kernels[0]
    assert k.name == "vectorAdd(float const *, float const *, float*, int)"
    assert (k.invocations, k.info["Device"], len(k.metrics)) == (1, "GeForce GTX 1080 Ti (0)", 120)
    assert k.metrics["inst_per_warp"] == 20.958546 and k.metrics["gld_transactions"] == 25000
    assert k.metrics["branch_efficiency"] == 100.0 and k.units["branch_efficiency"] == "%"
    assert k.metrics["gld_throughput"] == pytest.approx(126.023777 * 2**30)  # Avg, binary GB
    assert k.extrema["gld_throughput"] == (pytest.approx(126.024706 * 2**30),) * 2
    assert k.metrics["sysmem_write_throughput"] == pytest.approx(51.498413 * 2**20)
    assert (k.metrics["l2_utilization"], k.units["l2_utilization"]) == (2.0, "level (0-10)")
    assert k.metrics["sysmem_read_utilization"] == 0.0  # "Idle (0)"
    assert k.metrics["achieved_occupancy"] == 0.592947 and k.metrics["dram_write_transactions"] == 29


def test_nvprof_trace_and_its_binary_units(tools):
    r = read_nvprof_csv(tools / "nvprof_gtx1080_microgpusim.txt")
    assert (r.form, len(r.kernels)) == ("wide", 1)
    k = r.kernels[0]
    assert (k.name, k.id, k.info["Device"]) == ("_Z6vecAddIfEvPT_S1_S1_i", 1, "NVIDIA GeForce GTX 1080 (0)")
    assert k.metrics["elapsed_cycles_sm"] == 89855 and k.metrics["inst_issued"] == 408
    assert k.metrics["dram_read_bytes"] == 7136 and k.metrics["dram_utilization"] == 1.0
    # Four throughputs printed in GB/s and MB/s give one kernel duration only with binary
    # prefixes: the evidence for the unit table.
    durations = [k.metrics["l2_read_transactions"] * 32 / k.metrics["l2_read_throughput"],
                 k.metrics["l2_write_transactions"] * 32 / k.metrics["l2_write_throughput"],
                 k.metrics["dram_read_bytes"] / k.metrics["dram_read_throughput"],
                 k.metrics["sysmem_write_bytes"] / k.metrics["sysmem_write_throughput"]]
    assert durations == [pytest.approx(1.753e-6, rel=1e-5)] * 4


def test_nvprof_malformed(tools, tmp_path):
    src = tools / "nvprof_gtx1080ti_magus.csv"
    bad = _edit(src, tmp_path / "a.csv", 30, "126.024706GB/s,", "126.024706QB/s,")
    with pytest.raises(DataFileError, match="unknown unit 'QB/s'") as e:
        read_nvprof_csv(bad)
    assert (e.value.line, e.value.column) == (30, 6)
    with pytest.raises(DataFileError, match="expected 8 fields"):
        read_nvprof_csv(_edit(src, tmp_path / "b.csv", 7, ",1,", ",1,2,"))
    with pytest.raises(DataFileError, match="whole number of invocations"):
        read_nvprof_csv(_edit(src, tmp_path / "c.csv", 7, ",1,", ",x,"))


# ----------------------------------------------------------------------------- nvidia-smi

def test_nvidia_smi_log(tools):
    log = read_smi_csv(tools / "nvidia-smi_h800_cuda-test.csv")
    assert len(log.fields) == 41 and len(log.samples) == 127
    s = log.samples[0]
    assert s["power.draw"] == 74.86 and log.units["power.draw"] == "W"
    assert s["memory.total"] == 81559 * 2**20 and log.units["memory.total"] == "byte"
    assert s["clocks.current.sm"] == 885e6 and log.units["clocks.current.sm"] == "Hz"
    assert s["utilization.gpu"] == 0 and s["temperature.gpu"] == 36
    assert s["inforom.pwr"] is None and s["name"] == "NVIDIA H800" and s["pstate"] == "P0"
    assert s["clocks_event_reasons.active"] == "0x0000000000000001"
    sm = [v for v in log.values("clocks.current.sm") if v is not None]
    assert (min(sm), max(sm)) == (345e6, 1980e6)
    assert set(log.values("clocks.current.memory")) == {2619e6}
    with pytest.raises(TypeError, match="is text"):
        log.values("pstate")


def test_nvidia_smi_malformed(tools, tmp_path):
    src = tools / "nvidia-smi_h800_cuda-test.csv"
    with pytest.raises(DataFileError, match=r"differs from the header's \[W\]") as e:
        read_smi_csv(_edit(src, tmp_path / "a.csv", 2, "74.86 W", "74.86 MHz"))
    assert (e.value.line, e.value.column, e.value.problem.column_name) == (2, 31, "power.draw")
    with pytest.raises(DataFileError, match=r"expected a number in \[W\]"):
        read_smi_csv(_edit(src, tmp_path / "b.csv", 2, "74.86 W", "lots"))
    nounits = parse_smi_csv("power.draw [W], clocks.sm [MHz]\n75.10, 1410\n")
    assert nounits.samples == [{"power.draw": 75.10, "clocks.sm": 1410e6}]


# ----------------------------------------------------------------------------- mapping

def test_mapping_docstring_documents_every_formula():
    doc = mapping.__doc__
    for tables in (mapping.TIME_TABLES, mapping.TIME_EXTRA_TABLES, mapping.POWER_TABLES):
        for scheme, table in tables.items():
            for target, recipes in table.items():
                if isinstance(recipes, str):
                    continue
                for r in recipes:
                    assert r.formula in doc, (scheme, target, r.formula)


def test_time_inputs_from_pascal_ncu_match_nvprof_of_the_same_program(tools):
    # Both files profile `vectoradd 100 32` on a GTX 1080 (one with ncu, one with nvprof).
    ncu = read_ncu_csv(tools / "ncu_gtx1080_microgpusim.txt").kernels[0]
    nvp = read_nvprof_csv(tools / "nvprof_gtx1080_microgpusim.txt").kernels[0]
    assert scheme_of(ncu) == "ncu-pascal" and scheme_of(nvp) == "nvprof"
    t = time_model_inputs(ncu)
    assert set(t) == set(TIME_INPUTS) | {"blocks", "threads_per_block", "theoretical_occupancy"}
    assert (t["blocks"], t["threads_per_block"], t["theoretical_occupancy"]) == (1, 1024, 1.0)
    assert (t["warps"], t["inst_issued"], t["inst_per_warp"]) == (32, 408, 10.75)
    assert (t["dram_read_transactions"], t["dram_write_transactions"]) == (236, 12)
    assert t["achieved_occupancy"] == pytest.approx(0.2830)
    assert t["l2_read_transactions"] is None and t["flop_count_sp"] is None  # unmappable, documented
    ref = time_model_inputs(nvp)
    assert (ref["warps"], ref["inst_issued"], ref["inst_per_warp"]) == (32, 408, 10.75)
    assert (ref["l2_read_transactions"], ref["l2_write_transactions"], ref["flop_count_sp"]) == (66, 26, 100)
    m = explain(ncu, "time")
    assert m.formulas["inst_per_warp"] == ("smsp__inst_executed_sum / "
                                           "(launch__grid_size * ceil(launch__block_size / 32))")
    assert set(m.unmappable) == {"l2_read_transactions", "l2_write_transactions", "shared_load_transactions",
                                 "shared_store_transactions", "flop_count_sp"}


def test_time_inputs_from_modern_ncu_files(tools):
    gemm = read_ncu_csv(tools / "ncu_a100_learningnote4dev.csv").find("gemm_v0")
    t = time_model_inputs(gemm, missing="none")
    assert t["flop_count_sp"] == 2 * 34_359_738_368_000  # FMA counts twice, fadd = fmul = 0
    gemv = read_ncu_csv(tools / "ncu_rtx5090_llm-perf-opt.csv").kernels[0]
    t = time_model_inputs(gemv, missing="none")
    assert t["dram_read_transactions"] == pytest.approx(2.33e6 / 32) and t["dram_write_transactions"] == 0
    b200 = read_ncu_csv(tools / "ncu_b200_roofline-analysis.csv").kernels[0]
    t = time_model_inputs(b200, missing="none")
    assert t["warps"] == 148 * 4  # grid 148, block 128
    # Registers cap this kernel at 12 blocks of 4 warps: 48 of 64 warp slots.
    assert time_model_extras(b200) == {"blocks": 148, "threads_per_block": 128, "theoretical_occupancy": 0.75}
    with pytest.raises(MissingCountersError) as e:
        time_model_inputs(b200)
    assert set(e.value.missing) == set(TIME_INPUTS) - {"warps"}
    assert e.value.missing["l2_read_transactions"] == ("lts__t_sectors_op_read.sum",
                                                       "lts__t_sectors_op_atom.sum", "lts__t_sectors_op_red.sum")
    assert "achieved_occupancy (needs sm__warps_active.avg.pct_of_peak_sustained_active / 100" in str(e.value)


def test_time_inputs_from_nvprof_summary_report_missing_warps(tools):
    k = read_nvprof_csv(tools / "nvprof_gtx1080ti_magus.csv").kernels[0]
    with pytest.raises(MissingCountersError, match=r"warps \(needs unique_warps_launched \| warps_launched \| warps;"):
        time_model_inputs(k)
    t = time_model_inputs(k, missing="none")
    assert t["warps"] is None
    assert (t["inst_issued"], t["inst_per_warp"], t["l2_read_transactions"]) == (35068, 20.958546, 12740)


def test_optional_time_inputs_map_from_ncu_and_nvprof_names():
    ncu = {"smsp__inst_executed_op_global_ld.sum": 300.0, "smsp__inst_executed_op_global_st.sum": 100.0,
           "smsp__sass_thread_inst_executed_op_dadd_pred_on.sum": 64.0,
           "smsp__sass_thread_inst_executed_op_dmul_pred_on.sum": 32.0,
           "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum": 32.0}
    assert time_model_extras(ncu, "ncu") == {"global_requests": 400.0, "inst_fp_64": 128.0}
    nvprof = {"gld_transactions": 800.0, "gld_transactions_per_request": 8.0, "gst_transactions": 0.0,
              "gst_transactions_per_request": 0.0, "inst_fp_64": 5.0}
    assert time_model_extras(nvprof, "nvprof") == {"global_requests": 100.0, "inst_fp_64": 5.0}
    assert time_model_extras({"inst_fp_64": 1.0}, "dcgm") == {}
    assert "smsp__inst_executed_op_global_ld.sum" in required_metrics("time", "ncu")
    assert "sm__maximum_warps_per_active_cycle_pct" in required_metrics("time", "ncu")
    with pytest.raises(InputError, match="must be a number"):
        time_model_extras({**nvprof, "gld_transactions": "many"}, "nvprof")


def test_time_inputs_from_the_nv_dvfs_row_names():
    # The time model's own input format maps through unchanged (first row of gtx980_time_dev.csv).
    row = dict(zip(TIME_INPUTS, (32768, 0.969048, 150928, 147911, 214281, 196614, 221184, 159744,
                                 6225920, 8742877, 266.75)))
    assert time_model_inputs(row, "nvprof") == row


def test_power_utilizations_from_real_files(tools):
    b200 = read_ncu_csv(tools / "ncu_b200_roofline-analysis.csv").kernels[1]
    u = power_utilizations(b200, missing="none")
    assert (u["SP"], u["INT"], u["DP"], u["SFU"]) == pytest.approx((0.1899, 0.3430, 0.0004, 0.0703))
    assert u["L2"] is None and u["Shared"] is None and u["DRAM"] is None  # not collected in that file
    gemv = read_ncu_csv(tools / "ncu_rtx5090_llm-perf-opt.csv").kernels[0]
    assert power_utilizations(gemv, missing="none")["DRAM"] == pytest.approx(0.1966)
    pascal = read_ncu_csv(tools / "ncu_gtx1080_microgpusim.txt").kernels[0]
    u = power_utilizations(pascal)  # only DRAM is mappable there: no error for the rest
    assert u["DRAM"] == pytest.approx((1.59 + 0.08) / 100) and u["SP"] is None
    magus = read_nvprof_csv(tools / "nvprof_gtx1080ti_magus.csv").kernels[0]
    u = power_utilizations(magus)
    # Eq. 10: "Low (2)" split by inst_fp_32 = 50000 and inst_integer = 600704.
    assert u["SP"] == pytest.approx(0.2 * 50000 / 650704) and u["INT"] == pytest.approx(0.2 * 600704 / 650704)
    assert (u["DP"], u["SFU"], u["L2"], u["Shared"], u["DRAM"]) == (0.0, 0.0, 0.2, 0.0, 0.1)


def test_all_utilizations_are_in_unit_interval(tools):
    seen = 0
    for name in FILES:
        if name.startswith(("nvidia-smi", "ncu_b200_roofline-analysis_app")):
            continue
        for k in read_counters(tools / name).kernels:
            for comp, v in power_utilizations(k, missing="none").items():
                assert comp in COMPONENTS
                if v is not None:
                    assert 0.0 <= v <= 1.0
                    seen += 1
    assert seen >= 16 * 4 + 7 + 7


def test_utilization_out_of_range_is_an_error_not_clipped():
    with pytest.raises(InputError, match="outside"):
        power_utilizations({"DCGM_FI_PROF_PIPE_FP32_ACTIVE": 37.0, "DCGM_FI_PROF_PIPE_FP64_ACTIVE": 0.0,
                            "DCGM_FI_PROF_PIPE_INT_ACTIVE": 0.1, "DCGM_FI_PROF_DRAM_ACTIVE": 0.2}, "dcgm")


def test_dcgm_fields_from_the_nsfcac_data(tools):
    path = tools.parent / "nsfcac" / "v100_spec_dev.csv"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    with path.open() as fh:
        row = next(csv.DictReader(fh))  # bfs at 510 MHz
    values = {k: float(row[k]) for k in ("fp32_active", "fp64_active", "dram_active", "sm_active", "sm_occupancy")}
    with pytest.raises(MissingCountersError, match=r"INT \(needs DCGM_FI_PROF_PIPE_INT_ACTIVE"):
        power_utilizations(values, "dcgm")
    u = power_utilizations(values, "dcgm", missing="none")
    assert u == {"SP": 0.002858248, "INT": None, "DP": 0.0, "SFU": None, "L2": None, "Shared": None,
                 "DRAM": 0.131552639}
    assert set(explain(values, "power", "dcgm").unmappable) == {"SFU", "L2", "Shared"}
    # sm_active is 0 in this data set, so occupancy per active cycle is undefined, not 0.
    with pytest.raises(MissingCountersError, match="undefined"):
        time_model_inputs(values, "dcgm")
    t = time_model_inputs(values, "dcgm", missing="none")
    assert all(v is None for v in t.values())
    assert time_model_inputs({"SMOCC": 0.3, "SMACT": 0.6}, "dcgm")["achieved_occupancy"] == pytest.approx(0.5)


def test_mapping_argument_errors(tools):
    with pytest.raises(InputError, match="give scheme="):
        time_model_inputs({"inst_issued": 1.0})
    with pytest.raises(InputError, match="scheme must be one of"):
        power_utilizations({}, "cupti")
    with pytest.raises(InputError, match="missing must be"):
        time_model_inputs({}, "dcgm", missing="ignore")
    with pytest.raises(InputError, match="must be a number"):
        power_utilizations({"dram_active": "0.1"}, "dcgm", missing="none")
    k = read_ncu_csv(tools / "ncu_gtx1080_microgpusim.txt").kernels[0]
    k.units["dram__read_sectors"] = "byte"
    with pytest.raises(InputError, match="needs it in 'sector'"):
        time_model_inputs(k)


# ----------------------------------------------------------------------------- collection

def test_ncu_command_is_exact():
    cmd = ncu_command(["dram__sectors_read.sum", "smsp__inst_issued.sum", "dram__sectors_read.sum"],
                      ["./app", "--n", "3"], kernel_name="regex:gemm", launch_skip=2, launch_count=1)
    assert cmd == ["ncu", "--csv", "--print-units", "base", "--metrics",
                   "dram__sectors_read.sum,smsp__inst_issued.sum", "--target-processes", "all",
                   "--kernel-name", "regex:gemm", "--launch-skip", "2", "--launch-count", "1",
                   "./app", "--n", "3"]
    assert ncu_command(required_metrics("time"), ["a"], ncu="/opt/ncu")[:5] == [
        "/opt/ncu", "--csv", "--print-units", "base", "--metrics"]
    assert "smsp__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active" in required_metrics("power")


@pytest.mark.parametrize("kwargs, message", [
    (dict(metrics=[]), "no metrics"),
    (dict(metrics="dram__sectors_read.sum"), "not one string"),
    (dict(metrics=["a.sum,b.sum"]), "comma"),
    (dict(metrics=["a b"]), "whitespace"),
    (dict(target_argv=[]), "target_argv"),
    (dict(launch_count=0), "launch_count"),
    (dict(launch_skip=True), "launch_skip"),
    (dict(target_processes="some"), "target_processes"),
])
def test_ncu_command_rejects_bad_arguments(kwargs, message):
    args = dict(metrics=["dram__sectors_read.sum"], target_argv=["./app"])
    args.update(kwargs)
    with pytest.raises(InputError, match=message):
        ncu_command(args.pop("metrics"), args.pop("target_argv"), **args)


STAND_IN = """\
#!{python}
# STAND-IN for Nsight Compute's `ncu`, for tests only: records its arguments, prints some
# application output on stdout, and writes a recorded real ncu file (or ncu's permission
# error message) to the --log-file it was given. It does not profile anything.
import json, os, sys, time
args = sys.argv[1:]
with open(os.environ["STANDIN_ARGV"], "w") as fh:
    json.dump(args, fh)
log = args[args.index("--log-file") + 1]
mode = os.environ["STANDIN_MODE"]
print("application output that must not reach the CSV")
if mode == "hang":
    time.sleep(60)
with open(log, "w") as out:
    if mode == "perm":
        out.write("==PROF== Connected to process 42 (./app)\\n"
                  "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA "
                  "GPU Performance Counters on the target device 0. For instructions on enabling "
                  "permissions and to get more information see https://developer.nvidia.com/ERR_NVGPUCTRPERM\\n")
    else:
        out.write(open(os.environ["STANDIN_REPLAY"]).read())
sys.exit(int(os.environ.get("STANDIN_RC", "0")))
"""


@pytest.fixture
def stand_in(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "ncu"
    exe.write_text(STAND_IN.format(python=sys.executable))
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
               STANDIN_ARGV=str(tmp_path / "argv.json"))
    return env, tmp_path / "argv.json"


def test_run_ncu_with_stand_in_replaying_a_real_file(tools, stand_in):
    env, argv_file = stand_in
    env.update(STANDIN_MODE="replay", STANDIN_REPLAY=str(tools / "ncu_a100_learningnote4dev.csv"))
    metrics = required_metrics("time")
    report = run_ncu(metrics, ["./share_tile", "1280"], env=env, timeout_s=30)
    assert [k.name for k in report.kernels][2] == "void gemm_v0<float>(T1 *, T1 *, T1 *, int, int, int)"
    assert report.other_lines == []  # the application's stdout stayed out of the CSV
    assert time_model_inputs(report.kernels[2], missing="none")["flop_count_sp"] == 68_719_476_736_000
    argv = json.loads(argv_file.read_text())
    log = argv[argv.index("--log-file") + 1]
    assert argv == ncu_command(metrics, ["./share_tile", "1280"], ncu="ncu", log_file=log)[1:]
    # keep= saves what ncu wrote, byte for byte as read.
    kept = stand_in[1].parent / "kept.ncu.csv"
    run_ncu(metrics, ["./share_tile", "1280"], env=env, timeout_s=30, keep=kept)
    assert kept.read_text() == (tools / "ncu_a100_learningnote4dev.csv").read_text(errors="replace")


def test_run_ncu_nonzero_exit_with_counters_warns(tools, stand_in):
    env, _ = stand_in
    env.update(STANDIN_MODE="replay", STANDIN_RC="1",
               STANDIN_REPLAY=str(tools / "ncu_a100_learningnote4dev.csv"))
    with pytest.warns(UserWarning, match="exited with code 1"):
        report = run_ncu(["dram__bytes.sum"], ["./app"], env=env, timeout_s=30)
    assert len(report.kernels) == 3


def test_run_ncu_error_only_output(tools, stand_in):
    env, _ = stand_in
    env.update(STANDIN_MODE="replay", STANDIN_RC="1",
               STANDIN_REPLAY=str(tools / "ncu_b200_roofline-analysis_app-error.csv"))
    with pytest.raises(ProfilerError, match=r"The application returned an error code \(1\)"):
        run_ncu(["gpu__time_duration.sum"], ["./app"], env=env, timeout_s=30)


def test_run_ncu_permission_error_says_how_to_fix(stand_in):
    env, _ = stand_in
    env.update(STANDIN_MODE="perm", STANDIN_RC="1")
    with pytest.raises(CounterPermissionError) as e:
        run_ncu(["gpu__time_duration.sum"], ["./app"], env=env, timeout_s=30)
    msg = str(e.value)
    assert "ERR_NVGPUCTRPERM - The user does not have permission" in msg
    assert "NVreg_RestrictProfilingToAdminUsers=0" in msg and "sudo" in msg
    assert isinstance(e.value, PermissionError)


def test_run_ncu_timeout_stops_the_process(stand_in):
    env, _ = stand_in
    env.update(STANDIN_MODE="hang")
    t0 = time.monotonic()
    with pytest.raises(NcuTimeoutError, match="did not finish within 0.5 s"):
        run_ncu(["gpu__time_duration.sum"], ["./app"], env=env, timeout_s=0.5)
    assert time.monotonic() - t0 < 10


def test_run_ncu_not_installed(tmp_path):
    with pytest.raises(NcuNotFoundError, match="not found on PATH"):
        run_ncu(["gpu__time_duration.sum"], ["./app"], env={"PATH": str(tmp_path)})
    with pytest.raises(InputError, match="timeout_s"):
        run_ncu(["gpu__time_duration.sum"], ["./app"], timeout_s=0)
