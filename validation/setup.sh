# Sourced by the collection scripts on a lent GPU, from the repository root: the log to $OUT, the
# carried wheel installed, the CLI, and the folder `gpudvfs validate` names by default,
# validation/<GPU name, lowercase, dashed> ($name, $folder). DRY=1 (collect_dl.sh's stand-in, no
# GPU): the gpudvfs on PYTHONPATH, and the GPU named by DRY_GPU.
out=${OUT:-/tmp/gpudvfs-out}
mkdir -p "$out"
exec > >(tee -a "$out/log.txt") 2>&1

if [[ -z ${DRY:-} ]]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/gpudvfs-*.whl || exit 1
    export PYTHONPATH=/tmp/site
fi
export PYTHONUNBUFFERED=1
command -v ncu >/dev/null || PATH=$PATH:$(dirname "$(ls -d /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)")
# The CLI without its entry script (pip --target puts none on PATH).
gpudvfs=(python3 -c 'import sys; from gpudvfs.cli import main; sys.argv[0] = "gpudvfs"; main()')

if [[ -n ${DRY:-} ]]; then
    name=${DRY_GPU:-nvidia-h100-80gb-hbm3}
else
    name=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 | tr 'A-Z' 'a-z' | sed -E 's/[^a-z0-9]+/-/g; s/^-|-$//g')
fi
folder=validation/$name
mkdir -p "$folder"
