#!/usr/bin/env bash
# Deep-learning work on a lent GPU, in one call of the device tool, nothing set (README of this
# folder): the driver's own DVFS watched by `gpudvfs power observe`, four DL kernels profiled with
# Nsight Compute (--clock-control none) and measured, a training loop governed in dry run, and
# `gpudvfs validate --leave-clocks`. Build the wheel here, carry .whl/, run this there:
#   maturin build --release --out .whl          # here
#   bash validation/collect_dl.sh               # there: $OUT receives validation/<gpu> as a .tgz
# Each step has its own time limit; one that fails is logged and the next one runs. STEPS picks
# steps (default: "observe kernels train validate"; also "counter": the energy counter's raw
# updates, and "metrics": the tensor-pipe metrics this GPU's Nsight Compute knows), and SUFFIX
# names a rerun's folders (observe$SUFFIX, train$SUFFIX, validate$SUFFIX) beside the first run's;
# LOAD_VARIED=1 has the observed load run each of the four kernels in turn.
set -uo pipefail
STEPS=${STEPS:-observe kernels train validate}
SUFFIX=${SUFFIX:-}
want() { [[ " $STEPS " == *" $1 "* ]]; }
cd "$(dirname "$0")/.." || exit 1
source validation/setup.sh
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
obs=$folder/observe$SUFFIX train=$folder/train$SUFFIX val=$folder${SUFFIX:+/validate$SUFFIX}
mkdir -p "$obs" "$folder/kernels" "$train" "$val"
# Packed after every step too: a call stopped at its limit keeps what the steps before it wrote.
pack() { tar czf "$out/validation.tgz" "$folder"; }
trap pack EXIT
{
    echo "python: $(python3 --version)"
    python3 -c 'import torch, transformers, lightning, numpy; print("torch", torch.__version__, "transformers", transformers.__version__, "lightning", lightning.__version__, "numpy", numpy.__version__)'
    python3 -m pip show nvidia-ml-py 2>/dev/null | grep -E '^(Name|Version)'
    ncu --version | tail -1
    nvidia-smi --query-gpu=name,driver_version,vbios_version,pstate,power.limit,power.default_limit,clocks.max.sm,clocks.max.mem --format=csv
} > "$folder/environment.txt" 2>&1
cat "$folder/environment.txt"
nvidia-smi -q > "$folder/nvidia-smi-q.txt" 2>&1
nvidia-smi -q -d SUPPORTED_CLOCKS > "$folder/nvidia-smi-supported-clocks.txt" 2>&1

if want counter; then
    stamp "0. the energy counter's raw updates, idle then busy"
    timeout 30 python3 validation/dl_kernels.py counter --out "$folder/energy-counter-updates.csv"; echo "counter rc=$?"
fi
if want metrics; then
    timeout 60 ncu --query-metrics --chip gh100 > "$folder/ncu-query-metrics.txt" 2>&1; echo "metrics rc=$?"
    grep -i tensor "$folder/ncu-query-metrics.txt" | head -40
fi
if want observe; then
    stamp "1. the driver's own DVFS: power observe while idle, a long bf16 GEMM, idle, a memory-bound kernel"
    python3 validation/dl_kernels.py load --out "$obs/load.json" ${LOAD_VARIED:+--varied} &
    load=$!
    timeout 75 "${gpudvfs[@]}" power observe --device nvml --seconds 52 --interval 0.1 \
        --readings "$obs/readings.csv" -o "$obs/model.json" --json > "$obs/observe.json"
    echo "observe rc=$?"
    wait $load; echo "load rc=$?"
    pack
fi

if want kernels; then
stamp "2. DL kernels: Nsight Compute (clocks left to the driver), power at the driver's clocks, predict"
ncu_cmd=$("${gpudvfs[@]}" profile-command --device "$name" --clock-control none --launch-count 1 \
          "python3 validation/dl_kernels.py profile OP" | sed 's/--clock-control none/--clock-control none --profile-from-start off/')
echo "$ncu_cmd" > "$folder/kernels/ncu-command.txt"
for op in gemm_bf16 sdpa layernorm elementwise; do
    timeout 90 bash -c "${ncu_cmd/OP/$op}" > "$folder/kernels/$op.ncu.csv" 2> "$folder/kernels/$op.ncu.err"
    echo "ncu $op rc=$?"
    timeout 30 python3 validation/dl_kernels.py power "$op" --seconds 2 --out "$folder/kernels/$op.power.json"
    echo "power $op rc=$?"
    "${gpudvfs[@]}" predict "$folder/kernels/$op.ncu.csv" --json > "$folder/kernels/$op.predict.json" 2>&1
    "${gpudvfs[@]}" predict "$folder/kernels/$op.ncu.csv" --uncalibrated --json > "$folder/kernels/$op.uncalibrated.json" 2>&1
done
pack
fi
if want train; then
    stamp "3. a training loop under the governor, dry run"
    timeout 190 python3 validation/dl_train.py --out "$train" --seconds "${TRAIN_SECONDS:-100}"
    echo "train rc=$?"
    pack
fi
if want validate; then
    stamp "4. validate, clocks left to the driver, no profiles"
    timeout 120 "${gpudvfs[@]}" validate --device nvml --leave-clocks --no-profile --power-stride 7 --min-seconds 0.5 \
        -o "$val" --json > "$val/validate.json"
    echo "validate rc=$?"
fi
stamp "done"
