"""Writes manifest.json: the benchmark list of both suites.

Generated so that sweeps, names and the design-intent `stresses` vectors stay consistent. Edit this file, then run
``python kernels/make_manifest.py``; tests/hardware/test_kernels.py fails when manifest.json is stale.

`stresses` is a rough roofline estimate on a nominal GPU, not a measurement: for each benchmark
the time one SM would spend per element on each component is work / peak rate, and each
component's value is its time divided by the largest one (the bottleneck gets 1.0). The
nominal rates are per SM per core clock, loosely those of the GTX Titan X (Maxwell) of the
power paper. The simulated GPU uses these vectors to emulate the benchmarks; a real GPU's
utilizations come from its counters.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path

HERE = Path(__file__).resolve().parent
COMPONENTS = ("SP", "INT", "DP", "SFU", "L2", "Shared", "DRAM")

# Nominal peak rates per SM per clock: operations for units, bytes for memories.
NOMINAL = {"SP": 128.0, "INT": 64.0, "DP": 4.0, "SFU": 32.0, "Shared": 128.0, "L2": 42.0, "DRAM": 14.0}

BLOCK = 256
STREAM_UNROLL = 4
SWEEP_ARITH = [1, 2, 3, 4, 6, 8, 12, 16, 32, 64, 128]   # multiply-adds per chain per element
SWEEP_SHARED = [2, 4, 8, 16, 32, 64, 128, 256]           # shared load/store pairs per element
SWEEP_L2 = [0, 1, 2, 3, 4, 6, 8, 12]                    # multiply-adds per component per float4
SWEEP_DRAM = [0, 1, 2, 3, 4, 5, 6, 8, 10, 12, 16]
MIXES = [  # name: (SP, DP, INT, SF, SH) per element
    ("sp_int", (32, 0, 32, 0, 0)),
    ("sp_dp", (32, 4, 0, 0, 0)),
    ("sp_sf", (32, 0, 0, 8, 0)),
    ("int_sf", (0, 0, 32, 8, 0)),
    ("dp_sf", (0, 4, 0, 8, 0)),
    ("sp_shared", (32, 0, 0, 0, 8)),
    ("int_shared", (0, 0, 32, 0, 8)),
    ("dp_shared", (0, 4, 0, 0, 8)),
    ("sf_shared", (0, 0, 0, 8, 8)),
    ("all_low", (4, 1, 4, 1, 1)),
    ("all_high", (64, 8, 64, 16, 16)),
]


def stresses(work: Mapping[str, float]) -> dict[str, float]:
    """Component -> its time per element over the bottleneck's, rounded to 3 places (module notes).

    ``work`` is component -> operations (units) or bytes (memories) per element.
    """
    t = {c: work.get(c, 0.0) / NOMINAL[c] for c in COMPONENTS}
    peak = max(t.values())
    return {c: (round(t[c] / peak, 3) if peak > 0 else 0.0) for c in COMPONENTS}


def grid_stride(footprint: str, reps: int = 1) -> dict:
    """A grid-stride ``launch`` entry: ``reps`` passes per launch over buffers in ``"dram"`` or ``"l2"``."""
    return {"policy": "grid_stride", "block": BLOCK, "blocks_per_sm": 8, "footprint": footprint,
            "reps": reps}


def entry(name: str, suite: str, group: str, source: str | None, kernel: str | None, template: dict,
          launch: dict, work: Mapping[str, float] | None, sass: dict, description: str) -> dict:
    """One benchmark's manifest entry: ``source``, ``kernel`` None for the idle one; ``work`` None: no stress."""
    return {"name": name, "suite": suite, "group": group, "source": source, "kernel": kernel,
            "template": template, "launch": launch, "stresses": stresses(work) if work else
            {c: 0.0 for c in COMPONENTS}, "sass": sass, "description": description}


def power_suite() -> list[dict]:
    """The power suite of Guerreiro et al. (Sec. IV) and its mixes."""
    out = []
    # INT / SP / DP (Fig. 3a): 4 chains x OPS multiply-adds + 3 adds per element, one load and
    # one store of the element from DRAM.
    for group, t, size, cls, opcode in (("INT", "int", 4, "INT", "IMAD"),
                                        ("SP", "float", 4, "SP", "FFMA"),
                                        ("DP", "double", 8, "DP", "DFMA")):
        for ops in SWEEP_ARITH:
            work = {group: 4 * ops + 3, "DRAM": 2 * size, "L2": 2 * size}
            out.append(entry(
                f"{group.lower()}_ops{ops:03d}", "power", group, "arith.cu", "arith",
                {"T": t, "OPS": ops}, grid_stride("dram"), work,
                {"dominant": cls, "min_counts": {opcode: 4 * ops},
                 "intensity": {"sweep": "OPS", "numerator": cls, "denominator": ["GLOBAL"]}},
                f"{group} arithmetic intensity sweep: {4 * ops} {t} multiply-adds per element loaded"))
    # SF (Fig. 3b): 6 MUFU per step per element; 4 FP32 adds of glue.
    for ops in SWEEP_ARITH:
        work = {"SFU": 6 * ops, "SP": 4, "DRAM": 8, "L2": 8}
        out.append(entry(
            f"sf_ops{ops:03d}", "power", "SF", "sfu.cu", "sfu", {"OPS": ops}, grid_stride("dram"),
            work, {"dominant": "SFU", "min_counts": {"MUFU": 6 * ops},
                   "intensity": {"sweep": "OPS", "numerator": "SFU", "denominator": ["GLOBAL"]}},
            f"special-function sweep: {6 * ops} MUFU operations per element loaded"))
    # Shared memory (Fig. 3c): ITERS load/store pairs + one initial store per element.
    for it in SWEEP_SHARED:
        work = {"Shared": 4 * (2 * it + 1), "DRAM": 8, "L2": 8}
        out.append(entry(
            f"shared_it{it:03d}", "power", "Shared", "shared.cu", "shared_rw",
            {"T": "float", "ITERS": it, "BLOCK": BLOCK}, grid_stride("dram"), work,
            {"dominant": "SHARED", "min_counts": {"SHARED": 2 * it + 1},
             "intensity": {"sweep": "ITERS", "numerator": "SHARED", "denominator": ["GLOBAL"]}},
            f"shared-memory sweep: {it} conflict-free load/store pairs per element loaded"))
    # L2 (Fig. 3d): float4 copy of a buffer resident in L2, loads bypassing L1, many passes.
    for ops in SWEEP_L2:
        work = {"L2": 32, "SP": 4 * ops}
        out.append(entry(
            f"l2_ops{ops:02d}", "power", "L2", "stream.cu", "stream",
            {"V": "float4", "OPS": ops, "CG": True, "BLOCK": BLOCK, "UNROLL": STREAM_UNROLL},
            grid_stride("l2", reps=64), work,
            {"dominant": "GLOBAL", "mixed_in": ["SP"], "opcodes": ["LDG.E.128.STRONG.GPU", "STG.E.128"],
             "min_counts": {"FFMA": 4 * STREAM_UNROLL * ops},
             "intensity": {"sweep": "OPS", "numerator": "SP", "denominator": ["GLOBAL"]}},
            f"L2 stream: float4 copy inside L2 with {4 * ops} multiply-adds per 16 bytes"))
    # DRAM (Fig. 3e): float4 copy of a buffer 4x larger than L2 with few multiply-adds.
    for ops in SWEEP_DRAM:
        work = {"DRAM": 32, "L2": 32, "SP": 4 * ops}
        out.append(entry(
            f"dram_ops{ops:02d}", "power", "DRAM", "stream.cu", "stream",
            {"V": "float4", "OPS": ops, "CG": False, "BLOCK": BLOCK, "UNROLL": STREAM_UNROLL},
            grid_stride("dram"), work,
            {"dominant": "GLOBAL", "mixed_in": ["SP"], "opcodes": ["LDG.E.128", "STG.E.128"],
             "min_counts": {"FFMA": 4 * STREAM_UNROLL * ops},
             "intensity": {"sweep": "OPS", "numerator": "SP", "denominator": ["GLOBAL"]}},
            f"DRAM stream: float4 copy from DRAM with {4 * ops} multiply-adds per 16 bytes"))
    # Mixes: several components per element, side by side.
    for name, (sp, dp, it, sf, sh) in MIXES:
        work = {"SP": sp + 4, "DP": dp, "INT": it, "SFU": sf, "Shared": 4 * (2 * sh + 1) if sh else 0,
                "DRAM": 8, "L2": 8}
        mins = {k: v for k, v in (("FFMA", sp), ("DFMA", dp), ("IMAD", it), ("MUFU", sf),
                                  ("SHARED", 2 * sh + 1 if sh else 0)) if v}
        out.append(entry(
            f"mix_{name}", "power", "Mix", "mix.cu", "mix",
            {"SP": sp, "DP": dp, "INT": it, "SF": sf, "SH": sh, "BLOCK": BLOCK},
            grid_stride("dram"), work, {"min_counts": mins},
            f"mix per element: {sp} SP, {dp} DP, {it} INT multiply-adds, {sf} SFU ops, "
            f"{sh} shared load/store pairs"))
    out.append(entry("idle", "power", "Idle", None, None, {}, {"policy": "idle", "sleep_ms": 50},
                     None, {}, "GPU awake (context created) with no kernel running"))
    return out


def time_suite() -> list[dict]:
    """The latency and bandwidth suite of Wang & Chu (Sec. IV)."""
    chase_sass = {"dominant": "GLOBAL", "opcodes": ["LDG.E.64.STRONG.GPU"], "min_counts": {"LDG": 8}}
    return [
        entry("time_dram_latency", "time", "Latency", "chase.cu", "global_chase", {"UNROLL": 8},
              {"policy": "chase", "footprint": "dram", "stride_bytes": 512, "steps": 8192, "warm": 0},
              None, chase_sass,
              "dm_lat: one thread chasing pointers 512 B apart through a ring 4x the L2 size"),
        entry("time_l2_latency", "time", "Latency", "chase.cu", "global_chase", {"UNROLL": 8},
              {"policy": "chase", "footprint": "l2", "stride_bytes": 128, "steps": 8192, "warm": "ring"},
              None, chase_sass,
              "l2_lat: one thread chasing pointers 128 B apart through a ring a quarter of L2, warmed"),
        entry("time_shared_latency", "time", "Latency", "chase.cu", "shared_chase",
              {"WORDS": 1024, "UNROLL": 8}, {"policy": "shared_chase", "block": BLOCK, "steps": 8192},
              None, {"dominant": "SHARED", "min_counts": {"LDS": 8}},
              "sh_lat: one thread chasing byte offsets through 4 KiB of shared memory"),
        entry("time_dram_bandwidth", "time", "Bandwidth", "stream.cu", "stream",
              {"V": "float4", "OPS": 0, "CG": False, "BLOCK": BLOCK, "UNROLL": 8},
              grid_stride("dram"), {"DRAM": 32, "L2": 32},
              {"dominant": "GLOBAL", "opcodes": ["LDG.E.128", "STG.E.128"], "min_counts": {"LDG": 8, "STG": 8}},
              "dm_del: peak DRAM copy bandwidth (float4, 8 loads in flight per thread)"),
    ]


def manifest() -> dict:
    """The whole manifest."""
    return {
        "format": "gpudvfs-kernel-manifest",
        "version": 1,
        "doc": [
            "Microbenchmarks of gpudvfs, generated by make_manifest.py (edit that, not this file).",
            "suite 'power': Guerreiro et al., Sec. IV (INT, SP, DP, SF, Shared, L2, DRAM, Mix, Idle).",
            "suite 'time': Wang & Chu, Sec. IV (pointer-chase latencies, DRAM bandwidth).",
            "sources: .cu file -> NVRTC options and kernels (template parameter names, argument names:types).",
            "template: the kernel's template arguments, in order.",
            "launch.policy: grid_stride (grid = SMs x blocks_per_sm, footprint 'dram' = 4x L2 >= 64 MiB,",
            "  'l2' = L2/4, reps passes), chase / shared_chase (one thread; ring built by the launcher), idle.",
            "stresses: utilization-like vector over components; ROUGH DESIGN INTENT from a nominal",
            "  roofline (see make_manifest.py), not a measurement. The simulated GPU uses it to emulate",
            "  the benchmark; a real GPU's utilizations come from its counters.",
            "sass: what the disassembly of the kernel's hot loop must show (tests/hardware/test_kernels.py):",
            "  dominant class, classes deliberately mixed in, minimum counts (class or base opcode),",
            "  mnemonics present, and the intensity ratio that must grow along the sweep parameter.",
        ],
        "components": list(COMPONENTS),
        "sources": {
            "arith.cu": {"options": [], "kernels": {"arith": {
                "template": ["T", "OPS"], "args": ["in:T*", "out:T*", "n:u32", "a:T"]}}},
            "sfu.cu": {"options": [], "kernels": {"sfu": {
                "template": ["OPS"], "args": ["in:f32*", "out:f32*", "n:u32"]}}},
            "shared.cu": {"options": [], "kernels": {"shared_rw": {
                "template": ["T", "ITERS", "BLOCK"], "args": ["in:T*", "out:T*", "n:u32"]}}},
            "stream.cu": {"options": [], "kernels": {"stream": {
                "template": ["V", "OPS", "CG", "BLOCK", "UNROLL"],
                "args": ["in:V*", "out:V*", "n:u32", "a:f32", "reps:u32"]}}},
            "mix.cu": {"options": ["-ftz=true"], "kernels": {"mix": {
                "template": ["SP", "DP", "INT", "SF", "SH", "BLOCK"],
                "args": ["in:f32*", "out:f32*", "n:u32", "a:f32"]}}},
            "chase.cu": {"options": [], "kernels": {
                "global_chase": {"template": ["UNROLL"],
                                 "args": ["start:u64*", "warm:u32", "steps:u32", "sink:u64*", "cycles:i64*"]},
                "shared_chase": {"template": ["WORDS", "UNROLL"],
                                 "args": ["ring:u32*", "steps:u32", "sink:u32*", "cycles:i64*"]}}},
        },
        "benchmarks": power_suite() + time_suite(),
    }


def render() -> str:
    """The text of manifest.json: JSON, one key per line inside each benchmark."""
    # Hand-formatted: one key per line inside each benchmark, compact values, so the file reads
    # as a table and diffs stay small.
    m = manifest()
    c = lambda v: json.dumps(v, separators=(", ", ": "))  # noqa: E731
    lines = ["{"]
    for k in ("format", "version", "doc", "components"):
        lines.append(f" {c(k)}: {json.dumps(m[k], indent=2) if k == 'doc' else c(m[k])},")
    lines.append(' "sources": {')
    srcs = list(m["sources"].items())
    for i, (name, spec) in enumerate(srcs):
        lines.append(f"  {c(name)}: {c(spec)}{',' if i < len(srcs) - 1 else ''}")
    lines.append(" },")
    lines.append(' "benchmarks": [')
    for i, b in enumerate(m["benchmarks"]):
        body = ",\n".join(f"   {c(k)}: {c(v)}" for k, v in b.items())
        lines.append("  {\n" + body + "\n  }" + ("," if i < len(m["benchmarks"]) - 1 else ""))
    lines.append(" ]")
    lines.append("}")
    text = "\n".join(lines) + "\n"
    assert json.loads(text) == m  # the formatting must not change the content
    return text


if __name__ == "__main__":
    target = HERE / "manifest.json"
    target.write_text(render(), encoding="utf-8")
    m = manifest()
    print(f"wrote {target}: {len(m['benchmarks'])} benchmarks", file=sys.stderr)
