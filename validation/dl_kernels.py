"""Deep-learning kernels on a lent GPU, at the clocks the driver runs (nothing is set):

    python3 validation/dl_kernels.py profile OP          # under ncu --profile-from-start off
    python3 validation/dl_kernels.py power OP --seconds S --out FILE.json
    python3 validation/dl_kernels.py load --out FILE.json [--varied]   # idle, a long GEMM, idle, memory-bound
    python3 validation/dl_kernels.py counter --out FILE.csv # the energy counter's raw updates

OP is one of gemm_bf16 (an 8192^3 bf16 matrix product), sdpa (PyTorch's scaled dot-product
attention, bf16, causal), layernorm (bf16) and elementwise (bf16 GELU). `profile` warms up, then
launches OP once between cudaProfilerStart and Stop, so ncu with --profile-from-start off sees
that launch alone. `power` launches OP back to back for S seconds and records the time per
launch (CUDA events), the mean power (NVML's energy counter), the clocks and throttle reasons
polled meanwhile. `load` is the work `gpudvfs power observe` watches: it records what ran when.
`counter` polls NVML's energy counter every millisecond for 2 s idle then 2 s of GEMMs and
writes each change (time, mJ, and whether the GEMMs ran): how often it updates.
"""

from __future__ import annotations

import argparse
import json
import threading
import time

import torch

OPS = ("gemm_bf16", "sdpa", "layernorm", "elementwise")


def make(op: str):
    """A function that launches OP once on the current CUDA device (inputs made beforehand)."""
    dev, dt = "cuda", torch.bfloat16
    if op == "gemm_bf16":
        a, b = (torch.randn(8192, 8192, device=dev, dtype=dt) for _ in range(2))
        return lambda: torch.matmul(a, b)
    if op == "sdpa":
        q, k, v = (torch.randn(8, 16, 4096, 128, device=dev, dtype=dt) for _ in range(3))
        return lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    if op == "layernorm":
        x = torch.randn(16384, 8192, device=dev, dtype=dt)
        ln = torch.nn.LayerNorm(8192, device=dev, dtype=dt)
        return lambda: ln(x)
    if op == "elementwise":
        x = torch.randn(1 << 28, device=dev, dtype=dt)
        return lambda: torch.nn.functional.gelu(x)
    raise SystemExit(f"unknown op {op!r}; expected one of {OPS}")


def profile(op: str) -> None:
    fn = make(op)
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


def power(op: str, seconds: float) -> dict:
    nv, h = _nvml()
    fn = make(op)
    with torch.no_grad():
        t_end = time.perf_counter() + 0.5  # warm-up: the clocks and the power reading settle
        while time.perf_counter() < t_end:
            fn()
        torch.cuda.synchronize()
        polls: list = []
        stop = threading.Event()
        poller = threading.Thread(target=_poll, args=(nv, h, stop, polls))
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
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
        stop.set()
        poller.join()
    return {"op": op, "launches": n, "time_ms": start.elapsed_time(end) / n, "seconds": t1 - t0,
            "joules": (e1 - e0) / 1e3, "watts": (e1 - e0) / 1e3 / (t1 - t0), "polls": polls,
            "device": nv.nvmlDeviceGetName(h)}


def load(out: str, varied: bool = False) -> None:
    """Idle 8 s, a long bf16 GEMM 25 s (towards the power limit), idle 7 s, memory-bound 8 s; or
    (``varied``) each of the four kernels in turn, 8 s each, between idle spells."""
    if varied:
        plan = [("idle", 5.0, None)] + [(op, 8.0, make(op)) for op in OPS] + [("idle", 4.0, None)]
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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=("profile", "power", "load", "counter"))
    p.add_argument("op", nargs="?", choices=OPS)
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--out")
    p.add_argument("--varied", action="store_true", help="load: each kernel in turn")
    a = p.parse_args()
    if a.what == "profile":
        profile(a.op)
    elif a.what == "power":
        with open(a.out, "w") as f:
            json.dump(power(a.op, a.seconds), f, indent=1)
    elif a.what == "counter":
        counter(a.out)
    else:
        load(a.out, a.varied)


if __name__ == "__main__":
    main()
