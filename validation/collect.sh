#!/usr/bin/env bash
# Issue 16's collection on a lent GPU, in one call of the device tool (README "Real hardware").
# Build the wheel here, then run this there from the repository root with .whl/ carried:
#   maturin build --release --out .whl      # here
#   bash validation/collect.sh [validate options]   # there: $OUT receives the folder as a .tgz
# The clocks are left to the driver (--leave-clocks): a lent GPU's settings are not ours to
# change, so nothing is locked, tried or reset.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
source validation/setup.sh
trap 'tar czf "$out/validation.tgz" "$folder"' EXIT
{
    echo "python: $(python3 --version)"
    python3 -c 'import cupy, numpy; print("cupy", cupy.__version__, "numpy", numpy.__version__)'
    python3 -m pip show nvidia-ml-py 2>/dev/null | grep -E '^(Name|Version)'
    ncu --version | tail -1
    nvidia-smi --query-gpu=name,driver_version,vbios_version,pstate --format=csv
} > "$folder/environment.txt" 2>&1
cat "$folder/environment.txt"
nvidia-smi -q -d SUPPORTED_CLOCKS > "$folder/nvidia-smi-supported-clocks.txt" 2>&1

# ncu runs once per profiled workload: every 3rd power kernel keeps the call to a few minutes.
time timeout "${VALIDATE_TIMEOUT_S:-420}" "${gpudvfs[@]}" validate --device nvml --leave-clocks -o "$folder" \
    --power-stride 3 --min-seconds 1 "$@" --json > "$folder/validate.json"
echo "validate rc=$?"

# The power reading's changes, raw, for the refresh-period estimator: idle, then under a DRAM
# stream; each change as (start of the last poll with the old value, end of the first with the
# new one, new value in mW), seconds from the first poll.
timeout 60 python3 - "$folder/power-reading-changes.json" <<'PY'
import json, sys, threading, time
from gpudvfs.hardware.nvml import NvmlDevice, refresh_period_from_changes
from gpudvfs.hardware.sweep import suite_workloads

def trace(dev, seconds, launch):
    changes, polls, done = [], [0], threading.Event()
    def poll():
        t0 = prev = time.perf_counter()
        last = dev._power_mw()
        while time.perf_counter() - t0 < seconds:
            a = time.perf_counter(); v = dev._power_mw(); b = time.perf_counter()
            polls[0] += 1
            if v != last:
                changes.append((prev - t0, b - t0, v)); last = v
            prev = a
        done.set()
    th = threading.Thread(target=poll); th.start()
    while launch is not None and not done.is_set():
        launch()
    th.join()
    try:
        period, error = refresh_period_from_changes([(a, b) for a, b, _ in changes]), None
    except ValueError as exc:
        period, error = None, str(exc)
    return {"load": launch is not None, "seconds": seconds, "polls": polls[0], "period_s": period,
            "error": error, "changes": changes}

with NvmlDevice(leave_clocks=True) as dev:
    w = {x.name: x for x in suite_workloads("power")}["dram_ops04"]
    launch = dev._launcher(w)
    runs = [trace(dev, 4.0, load) for load in (None, None, launch, launch, launch)]
json.dump({"device": dev.name, "reading": dev.power_reading, "runs": runs}, open(sys.argv[1], "w"), indent=1)
print([(r["load"], r["polls"], len(r["changes"]), r["period_s"], r["error"]) for r in runs])
PY
cat "$folder/report.md"
