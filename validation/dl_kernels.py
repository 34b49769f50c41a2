"""Deep-learning kernels on a lent GPU, at the clocks the driver runs (nothing is set):

    python3 validation/dl_kernels.py profile OP          # under ncu --profile-from-start off
    python3 validation/dl_kernels.py power OP --seconds S --out FILE.json
    python3 validation/dl_kernels.py load --out FILE.json [--varied --seconds S]   # what power observe watches
    python3 validation/dl_kernels.py counter --out FILE.csv # the energy counter's raw updates
    python3 validation/dl_kernels.py support --out FILE.json  # clocks, power limits, permissions: read only

OP is one of OPS: bf16 GEMMs (`GEMMS`: M x K by K x N, from a memory-bound weight stream to
the power cap), an fp8 GEMM (`torch._scaled_mm`, e4m3; Hopper and Ada only, skipped elsewhere
with the reason logged), PyTorch's scaled dot-product attention (bf16, causal), layer norm
(bf16) and GELU (bf16). `profile` warms up, then launches OP once between cudaProfilerStart and
Stop, so ncu with --profile-from-start off sees that launch alone. `power` launches OP back to
back for S seconds and records the time per launch (CUDA events), the mean power (NVML's energy
counter), each GPM metric over the whole span (`GPM`: SM, each pipe, tensor, DRAM), the clocks
and throttle reasons polled meanwhile. `load` is the work `gpudvfs power observe` watches: it
records what ran when. `counter` polls NVML's energy counter every millisecond for 2 s idle then
2 s of GEMMs and writes each change (time, mJ, and whether the GEMMs ran): how often it
updates. `support` reads, setting nothing, what the GPU supports and what this process may set.
"""

from __future__ import annotations

import argparse
import json
import threading
import time

#: bf16 GEMMs as (M, K, N): a 16-row weight stream (memory-bound), K = 256 (about the ridge of
#: an H100's roofline), 2048^3 (short launches), 8192^3 (the H200 run's) and 16384^3 (the cap).
GEMMS = {"gemm_bf16_stream": (16, 16384, 16384), "gemm_bf16_k256": (131072, 256, 256),
         "gemm_bf16_2048": (2048, 2048, 2048), "gemm_bf16": (8192, 8192, 8192),
         "gemm_bf16_16384": (16384, 16384, 16384)}
OPS = (*GEMMS, "gemm_fp8", "sdpa", "layernorm", "elementwise")
#: NVML GPM metrics read over `power`'s span, by the name written.
GPM = {"sm": "NVML_GPM_METRIC_SM_UTIL", "sm_occupancy": "NVML_GPM_METRIC_SM_OCCUPANCY",
       "fp16": "NVML_GPM_METRIC_FP16_UTIL", "fp32": "NVML_GPM_METRIC_FP32_UTIL",
       "fp64": "NVML_GPM_METRIC_FP64_UTIL", "tensor": "NVML_GPM_METRIC_ANY_TENSOR_UTIL",
       "tensor_hmma": "NVML_GPM_METRIC_HMMA_TENSOR_UTIL", "dram": "NVML_GPM_METRIC_DRAM_BW_UTIL"}


class Unsupported(Exception):
    """OP cannot run on this device; the message says why."""


def make(op: str, dev: str = "cuda", scale: int = 1):
    """A function that launches OP once on ``dev`` (inputs made beforehand); ``scale`` divides every
    dimension (a CPU check of the code, not of the kernels)."""
    import torch

    dt = torch.bfloat16

    def d(n: int) -> int:
        return max(1, n // scale)

    if op in GEMMS:
        m, k, n = (d(x) for x in GEMMS[op])
        a, b = torch.randn(m, k, device=dev, dtype=dt), torch.randn(k, n, device=dev, dtype=dt)
        return lambda: torch.matmul(a, b)
    if op == "gemm_fp8":
        fp8 = getattr(torch, "float8_e4m3fn", None)
        if fp8 is None or not hasattr(torch, "_scaled_mm"):
            raise Unsupported(f"torch {torch.__version__} has no float8_e4m3fn or _scaled_mm")
        if dev != "cuda" or torch.cuda.get_device_capability() < (8, 9):
            raise Unsupported(f"an fp8 GEMM needs a CUDA GPU of compute capability 8.9 or more, not {dev}"
                              + (f" {torch.cuda.get_device_capability()}" if dev == "cuda" else ""))
        n = d(8192)
        a = torch.randn(n, n, device=dev).to(fp8)
        b = torch.randn(n, n, device=dev).to(fp8).t()  # column-major, as _scaled_mm wants
        one = torch.ones((), device=dev)
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=dt)
    if op == "sdpa":
        q, k, v = (torch.randn(8, 16, d(4096), d(128), device=dev, dtype=dt) for _ in range(3))
        return lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    if op == "layernorm":
        x = torch.randn(d(16384), d(8192), device=dev, dtype=dt)
        ln = torch.nn.LayerNorm(d(8192), device=dev, dtype=dt)
        return lambda: ln(x)
    if op == "elementwise":
        x = torch.randn(d(1 << 28), device=dev, dtype=dt)
        return lambda: torch.nn.functional.gelu(x)
    raise SystemExit(f"unknown op {op!r}; expected one of {OPS}")


def profile(op: str) -> None:
    import torch

    try:
        fn = make(op)
    except Unsupported as e:
        raise SystemExit(f"{op} skipped: {e}") from None
    with torch.no_grad():
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        fn()
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()


def _nvml():
    import pynvml as nv
    import torch

    nv.nvmlInit()
    return nv, nv.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())


def _poll(nv, h, stop: threading.Event, out: list, every: float = 0.05) -> None:
    while not stop.is_set():
        try:
            reasons = nv.nvmlDeviceGetCurrentClocksEventReasons(h)
        except Exception:
            reasons = -1
        out.append({"t": time.perf_counter(), "core_mhz": nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
                    "mem_mhz": nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM),
                    "watts": nv.nvmlDeviceGetPowerUsage(h) / 1e3, "reasons": int(reasons),
                    "temp_c": nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)})
        stop.wait(every)


def gpm_span(nv, h):
    """Take a GPM sample now; the returned function takes another and gives each `GPM` metric (percent)
    between the two, None for one this GPU or binding lacks; None in place of the function without GPM."""
    try:
        if not nv.nvmlGpmQueryDeviceSupport(h).isSupportedDevice:
            return None
        first, second = nv.nvmlGpmSampleAlloc(), nv.nvmlGpmSampleAlloc()
        nv.nvmlGpmSampleGet(h, first)
    except (AttributeError, nv.NVMLError):
        return None
    known = {k: getattr(nv, m) for k, m in GPM.items() if hasattr(nv, m)}

    def end() -> dict:
        nv.nvmlGpmSampleGet(h, second)
        get = nv.c_nvmlGpmMetricsGet_t()
        get.version, get.numMetrics = nv.NVML_GPM_METRICS_GET_VERSION, len(known)
        get.sample1, get.sample2 = first, second
        for i, metric in enumerate(known.values()):
            get.metrics[i].metricId = metric
        nv.nvmlGpmMetricsGet(get)
        values = {k: get.metrics[i].value if get.metrics[i].nvmlReturn == 0 else None for i, k in enumerate(known)}
        for sample in (first, second):
            nv.nvmlGpmSampleFree(sample)
        return {k: values.get(k) for k in GPM}

    return end


def power(op: str, seconds: float) -> dict:
    """OP back to back for ``seconds``; the energy read between the counter's updates (99.4 ms apart
    on an H200), its raw difference beside it."""
    import torch

    from gpudvfs.hardware.energy_counter import CounterPoller

    nv, h = _nvml()
    fn = make(op)
    with torch.no_grad(), CounterPoller(lambda: nv.nvmlDeviceGetTotalEnergyConsumption(h) / 1e3) as counter:
        t_end = time.perf_counter() + 0.5  # warm-up: the clocks and the power reading settle
        while time.perf_counter() < t_end:
            fn()
        torch.cuda.synchronize()
        polls: list = []
        stop = threading.Event()
        poller = threading.Thread(target=_poll, args=(nv, h, stop, polls))
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        gpm = gpm_span(nv, h)
        e0, t0 = nv.nvmlDeviceGetTotalEnergyConsumption(h), time.perf_counter()
        poller.start()
        start.record()
        n = 0
        while time.perf_counter() - t0 < seconds:
            for _ in range(10):
                fn()
            n += 10
            torch.cuda.synchronize()
        end.record()
        torch.cuda.synchronize()
        e1, t1 = nv.nvmlDeviceGetTotalEnergyConsumption(h), time.perf_counter()
        activity = None if gpm is None else gpm()
        stop.set()
        poller.join()
        counter.wait_past(t1)
        joules, raw = counter.energy(t0, t1), (e1 - e0) / 1e3
    return {"op": op, "launches": n, "time_ms": start.elapsed_time(end) / n, "seconds": t1 - t0,
            "joules": raw if joules is None else joules,
            "energy": "counter-raw" if joules is None else "counter-interpolated",
            "watts": (raw if joules is None else joules) / (t1 - t0), "raw_joules": raw, "gpm_pct": activity,
            "polls": polls, "device": nv.nvmlDeviceGetName(h)}


def support(nv, h) -> dict:
    """What the GPU supports and what this process may set, read without setting anything: each
    value, or the error its read raised (a driver or binding that lacks the call, or refuses it).
    NVML gives no power-limit step: the range is [min, max] in mW."""
    import os

    def read(call: str, *args):
        try:
            return getattr(nv, call)(h, *args)
        except (AttributeError, nv.NVMLError) as e:
            return f"{type(e).__name__}: {e}"

    mems = read("nvmlDeviceGetSupportedMemoryClocks")
    clocks = {m: read("nvmlDeviceGetSupportedGraphicsClocks", m) for m in mems} if isinstance(mems, list) else mems
    restricted = {}
    for api in ("APPLICATION_CLOCKS", "AUTO_BOOSTED_CLOCKS"):
        value = read("nvmlDeviceGetAPIRestriction", getattr(nv, f"NVML_RESTRICTED_API_SET_{api}", -1))
        restricted[api.lower()] = value == 1 if isinstance(value, int) else value  # NVML_FEATURE_ENABLED
    return {"name": read("nvmlDeviceGetName"), "root": os.geteuid() == 0, "supported_clocks_mhz": clocks,
            "power_limit_constraints_mw": read("nvmlDeviceGetPowerManagementLimitConstraints"),
            "power_limit_default_mw": read("nvmlDeviceGetPowerManagementDefaultLimit"),
            "power_limit_mw": read("nvmlDeviceGetPowerManagementLimit"),
            "power_limit_enforced_mw": read("nvmlDeviceGetEnforcedPowerLimit"),
            "api_restricted_to_root": restricted, "mig_mode": read("nvmlDeviceGetMigMode"),
            "persistence_mode": read("nvmlDeviceGetPersistenceMode"),
            "compute_mode": read("nvmlDeviceGetComputeMode")}


def load(out: str, varied: bool = False, spell: float = 8.0) -> None:
    """Idle 8 s, a long bf16 GEMM 25 s (towards the power limit), idle 7 s, memory-bound 8 s; or
    (``varied``) each op this GPU runs in turn, ``spell`` seconds each, between idle spells."""
    import torch

    if varied:
        plan: list = [("idle", 5.0, None)]
        for op in OPS:
            try:
                plan.append((op, spell, make(op)))
            except Unsupported as e:
                print(f"load: {op} skipped: {e}", flush=True)
        plan.append(("idle", 4.0, None))
    else:
        plan = [("idle", 8.0, None), ("gemm_bf16", 25.0, make("gemm_bf16")), ("idle", 7.0, None),
                ("elementwise", 8.0, make("elementwise"))]
    log, t0 = [], time.perf_counter()
    with torch.no_grad():
        for label, seconds, fn in plan:
            a = time.perf_counter()
            while time.perf_counter() - a < seconds:
                if fn is None:
                    time.sleep(0.05)
                    continue
                for _ in range(20):
                    fn()
                torch.cuda.synchronize()
            log.append({"phase": label, "start_s": a - t0, "end_s": time.perf_counter() - t0})
    with open(out, "w") as f:
        json.dump(log, f, indent=1)


def counter(out: str) -> None:
    import torch

    nv, h = _nvml()
    gemm = make("gemm_bf16")
    stop, busy = threading.Event(), threading.Event()

    def work() -> None:
        with torch.no_grad():
            while not stop.is_set():
                if busy.is_set():
                    gemm()
                    torch.cuda.synchronize()
                else:
                    time.sleep(0.001)

    th = threading.Thread(target=work)
    th.start()
    rows, last, t0 = [], None, time.perf_counter()
    while (t := time.perf_counter() - t0) < 4.0:
        if t >= 2.0:
            busy.set()
        e = nv.nvmlDeviceGetTotalEnergyConsumption(h)
        if e != last:
            rows.append((t, e, int(busy.is_set())))
            last = e
        time.sleep(0.001)
    stop.set()
    th.join()
    with open(out, "w") as f:
        f.write("t_s,energy_mj,busy\n" + "".join(f"{t:.6f},{e},{b}\n" for t, e, b in rows))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=("profile", "power", "load", "counter", "support"))
    p.add_argument("op", nargs="?", choices=OPS)
    p.add_argument("--seconds", type=float, default=2.0, help="power: the span; load --varied: each op's spell")
    p.add_argument("--out")
    p.add_argument("--varied", action="store_true", help="load: each op in turn")
    return p


def main() -> None:
    p = parser()
    a = p.parse_args()
    if a.what in ("profile", "power") and a.op is None:
        p.error(f"{a.what} needs OP, one of {', '.join(OPS)}")
    if a.what != "profile" and not a.out:
        p.error(f"{a.what} needs --out FILE")
    if a.what == "profile":
        profile(a.op)
    elif a.what == "power":
        try:
            doc = power(a.op, a.seconds)
        except Unsupported as e:
            print(f"power: {a.op} skipped: {e}", flush=True)
            doc = {"op": a.op, "skipped": str(e)}
        with open(a.out, "w") as f:
            json.dump(doc, f, indent=1)
    elif a.what == "counter":
        counter(a.out)
    elif a.what == "support":
        import pynvml as nv

        nv.nvmlInit()
        with open(a.out, "w") as f:
            json.dump(support(nv, nv.nvmlDeviceGetHandleByIndex(0)), f, indent=1)
    else:
        load(a.out, a.varied, a.seconds if a.varied else 8.0)


if __name__ == "__main__":
    main()
