#!/usr/bin/env bash
# The GPU checks of the fast path, as one prepared script (about 9 minutes on one H100/H200):
# timings first, alone on the machine, then the correctness checks side by side.
#
#   bash benchmark/gpu_checks.sh [LOG_DIR]
#   # logs: env, bench, bench_per_layer, pipeline, profile, check, pytest
#
# Run it from the repository root with the project installed (or PYTHONPATH=.), on a machine
# with one GPU. Each step has its own time limit so that one hang cannot eat the others; the
# limits add up to 535 s, so that a device call of 600 s holds the install and all of them.
# tests/test_gpu_checks_script.py runs every benchmark command below on the CPU.
set -u
LOGS=${1:-gpu-logs}
mkdir -p "$LOGS"
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
STEP_START=$(date +%s)
stamp() { echo "[$(( $(date +%s) - STEP_START )) s] $*"; }

stamp "environment" | tee "$LOGS/env.log"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >>"$LOGS/env.log" 2>&1
$PY -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0], torch.cuda.get_device_name())" >>"$LOGS/env.log" 2>&1
cat "$LOGS/env.log"

# 1. Before/after for ResNet-56 (bare loop, harness, masks, every method) and four more models.
stamp "bench"
timeout 170 $PY -m benchmark.bench --device cuda --iters 40 --repeats 1 --methods all \
    --models resnet18,vgg16,wrn28_10,resnet50 2>&1 | tee "$LOGS/bench.log"

# 1b. STR, CS and DST reparametrized layer by layer (before) against the batched default above.
stamp "bench per-layer reparametrization"
timeout 50 $PY -m benchmark.bench --device cuda --iters 40 --repeats 1 --methods str,cs,dst \
    --modes fast-per-layer 2>&1 | tee "$LOGS/bench_per_layer.log"

# 2. The real pipeline: prunebench run, BIMP, 50,000 stand-in images, 5 epochs, per mode (with
#    each epoch's wall-clock); then a profile of 50 steady-state iterations of it in bf16 (where
#    the device waits). The stand-in is written once, outside the logs.
CIFAR=${TMPDIR:-/tmp}/prunebench-cifar
stamp "pipeline"
timeout 160 $PY -m benchmark.bench_pipeline --device cuda --epochs 5 --root "$CIFAR" 2>&1 \
    | tee "$LOGS/pipeline.log"
stamp "profile"
timeout 45 $PY -m benchmark.profile_pipeline --device cuda --mode fast-bf16 --root "$CIFAR" 2>&1 \
    | tee "$LOGS/profile.log"

# 3. Correctness, side by side: the fast path against eager for every method (deterministic
#    twice, resume), and the whole test suite on the GPU.
stamp "checks"
timeout 110 $PY -m benchmark.check_fast_path >"$LOGS/check.log" 2>&1 &
CHECK=$!
timeout 110 $PY -m pytest -m "not slurm" -q -n 10 -p no:cacheprovider --timeout 90 \
    >"$LOGS/pytest.log" 2>&1
wait $CHECK
cat "$LOGS/check.log"
tail -25 "$LOGS/pytest.log"
stamp "done"
