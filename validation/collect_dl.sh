#!/usr/bin/env bash
# Deep-learning work on a lent GPU, in one call of the device tool, nothing set (README of this
# folder): what the GPU supports (read only), the driver's own DVFS watched by `gpudvfs power
# observe` while each DL kernel runs in turn, the kernels profiled with Nsight Compute
# (--clock-control none, tensor-pipe metrics) and measured (time, clocks, power, GPM), the
# observed model's prediction of each kernel left out, and a training job in dry run. Build the
# wheel here, carry .whl/, run this there:
#   rm -rf .whl && maturin build --release --out .whl   # here (one wheel: setup.sh installs .whl/gpudvfs-*)
#   bash validation/collect_dl.sh               # there: $OUT receives validation/<gpu> as a .tgz
# Each step has its own time limit; one that fails is logged and the next one runs; results are
# packed after every step. STEPS picks steps (default: "support observe kernels chain train";
# also "counter": the energy counter's raw updates, "metrics": the tensor-pipe metrics this GPU's
# Nsight Compute knows, "validate"). SUFFIX names this run's folders and files (kernels$SUFFIX,
# observe$SUFFIX, ...); it defaults to "" on a GPU with no kernels/ recorded yet, else to the
# date, so that a run never overwrites a recorded one. DRY=1 prints each GPU command instead of
# running it, also to $OUT/dry-commands.txt (the stand-in tests/hardware/test_collect_dl.py runs
# here, without a GPU). BUDGET_S (default 570) bounds the whole: the kernels stop starting new
# ones after KERNELS_S (default 240), and the training job shrinks to what is left.
set -uo pipefail
STEPS=${STEPS:-support observe kernels chain train}
want() { [[ " $STEPS " == *" $1 "* ]]; }
cd "$(dirname "$0")/.." || exit 1
source validation/setup.sh
SUFFIX=${SUFFIX-$([[ -e $folder/kernels ]] && date -u +-%m%d-%H%M)}
OPS=$(python3 -c 'import sys; sys.path.insert(0, "validation"); from dl_kernels import OPS; print(*OPS)') || exit 1
t0=$(date +%s) budget=${BUDGET_S:-570}
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
left() { echo $(( budget - ($(date +%s) - t0) )); }
# Each GPU command through `gpu`: DRY=1 prints it instead (a command that reads no GPU runs either way).
gpu() { if [[ -n ${DRY:-} ]]; then echo "DRY: $*" | tee -a "$out/dry-commands.txt"; else "$@"; fi; }
obs=$folder/observe$SUFFIX kern=$folder/kernels$SUFFIX train=$folder/train$SUFFIX val=$folder/validate$SUFFIX
mkdir -p "$obs" "$kern" "$train"
pack() { gpu tar czf "$out/validation.tgz" "$folder"; }
trap pack EXIT
echo "run: $name, suffix '${SUFFIX}', steps: $STEPS"
{
    echo "python: $(python3 --version)"
    gpu python3 -c 'import torch, transformers, lightning, numpy; print("torch", torch.__version__, "transformers", transformers.__version__, "lightning", lightning.__version__, "numpy", numpy.__version__)'
    python3 -m pip show nvidia-ml-py 2>/dev/null | grep -E '^(Name|Version)'
    gpu ncu --version | tail -1
    gpu nvidia-smi --query-gpu=name,driver_version,vbios_version,pstate,power.limit,power.default_limit,power.min_limit,power.max_limit,clocks.max.sm,clocks.max.mem,mig.mode.current --format=csv
} > "$folder/environment$SUFFIX.txt" 2>&1
cat "$folder/environment$SUFFIX.txt"
gpu nvidia-smi -q > "$folder/nvidia-smi-q$SUFFIX.txt" 2>&1

if want support; then
    stamp "0. what the GPU supports and what this process may set, read without setting"
    gpu timeout 30 python3 validation/dl_kernels.py support --out "$folder/support$SUFFIX.json"; echo "support rc=$?"
fi
if want counter; then
    stamp "0. the energy counter's raw updates, idle then busy"
    gpu timeout 30 python3 validation/dl_kernels.py counter --out "$folder/energy-counter-updates$SUFFIX.csv"; echo "counter rc=$?"
fi
if want metrics; then
    gpu timeout 60 ncu --query-metrics --chip gh100 > "$folder/ncu-query-metrics$SUFFIX.txt" 2>&1; echo "metrics rc=$?"
fi
if want observe; then
    # Idle 5 s, each op for SPELL s, idle 4 s; the load's set-up (CUDA, every op's inputs) before.
    spell=${SPELL:-5}
    seconds=$(( 9 + spell * $(wc -w <<< "$OPS") + 12 ))
    stamp "1. the driver's own DVFS: power observe for $seconds s while each op runs $spell s in turn"
    gpu python3 validation/dl_kernels.py load --varied --seconds "$spell" --out "$obs/load.json" &
    load=$!
    gpu timeout $(( seconds + 25 )) "${gpudvfs[@]}" power observe --device nvml --seconds "$seconds" --interval 0.1 \
        --readings "$obs/readings.csv" -o "$obs/model.json" --json > "$obs/observe.json"
    echo "observe rc=$?"
    wait $load; echo "load rc=$?"
    pack
fi

if want kernels; then
    stamp "2. DL kernels: time, clocks, power and GPM back to back; Nsight Compute (clocks left to the driver); predict"
    # The tensor pipe's instructions (HMMA, Hopper's GMMA), its cycles by kind (HGMMA and fp8's QGMMA
    # together) and its bf16 and fp8 math ops, beside what predict reads; names from ncu-query-metrics.txt.
    tensor=sm__inst_executed_pipe_tensor_op_hmma.sum,sm__inst_executed_pipe_tensor_op_gmma.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_type_hmma_hgmma_qgmma_cycles_active.avg.pct_of_peak_sustained_active,sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32.sum,sm__ops_path_tensor_src_fp8.sum
    ncu_cmd=$("${gpudvfs[@]}" profile-command --device "$name" --clock-control none --launch-count 1 \
              -o "$kern/@OP@.ncu.csv" "python3 validation/dl_kernels.py profile @OP@") || exit 1
    ncu_cmd=$(sed -E "s/--metrics ([^ ]+)/--metrics \1,$tensor/; s/--clock-control none/--clock-control none --profile-from-start off/" <<< "$ncu_cmd")
    echo "$ncu_cmd" > "$kern/ncu-command.txt"
    k0=$(date +%s)
    for op in $OPS; do
        if (( $(date +%s) - k0 > ${KERNELS_S:-240} )); then echo "kernels: out of time, $op and those after skipped"; break; fi
        gpu timeout 30 python3 validation/dl_kernels.py power "$op" --seconds 2 --out "$kern/$op.power.json"
        echo "power $op rc=$?"
        if grep -q '"skipped"' "$kern/$op.power.json" 2>/dev/null; then continue; fi
        gpu timeout 60 bash -c "${ncu_cmd//@OP@/$op}" > "$kern/$op.ncu.err" 2>&1
        echo "ncu $op rc=$?"
        gpu timeout 30 "${gpudvfs[@]}" predict "$kern/$op.ncu.csv" --json > "$kern/$op.predict.json" 2>&1
        gpu timeout 30 "${gpudvfs[@]}" predict "$kern/$op.ncu.csv" --uncalibrated --json > "$kern/$op.uncalibrated.json" 2>&1
        echo "predict $op rc=$?"
    done
    pack
fi
if want chain; then
    stamp "3. observed, then predicted: each kernel's power by the model observed without its windows"
    gpu timeout 120 python3 validation/observe_chain.py "$obs" "$kern" > "$folder/observe-chain$SUFFIX.md" 2>&1
    echo "chain rc=$?"
    cat "$folder/observe-chain$SUFFIX.md"
    pack
fi
if want train; then
    # Up to 90 s of set-up (model, batch calibration) and closing beyond --seconds, within the budget.
    seconds=$(( $(left) - 100 < ${TRAIN_SECONDS:-180} ? $(left) - 100 : ${TRAIN_SECONDS:-180} ))
    stamp "4. a training job in dry run for $seconds s: Trainer and a plain loop, each knob; windows; overhead"
    if (( seconds >= 30 )); then
        gpu timeout $(( seconds + 90 )) python3 validation/dl_train.py --out "$train" --seconds "$seconds" --knob clocks --knob core-clock --knob power-limit --overhead
        echo "train rc=$?"
    else
        echo "train: skipped, $(left) s left"
    fi
    pack
fi
if want validate; then
    stamp "5. validate, clocks left to the driver, no profiles"
    mkdir -p "$val"
    gpu timeout 120 "${gpudvfs[@]}" validate --device nvml --leave-clocks --no-profile --power-stride 7 --min-seconds 0.5 \
        -o "$val" --json > "$val/validate.json"
    echo "validate rc=$?"
fi
stamp "done"
