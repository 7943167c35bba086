#!/usr/bin/env bash
# The GPU checks, as one prepared script (about 9 minutes on one H100/H200), most wanted first:
# timings alone on the machine, then the correctness checks side by side, then the extras.
#
#   bash benchmark/gpu_checks.sh [LOG_DIR]
#   # logs (8 files at most, what one device call brings back):
#   #   env, pack, bench, pipeline, check, pytest, models, extra
#
# Run it from the repository root with the project installed (or PYTHONPATH=.), on a machine
# with one GPU. Each step has its own time limit so that one hang cannot eat the others; the
# limits add up to 540 s, so that a device call of 600 s holds the install and all of them.
# tests/bench/test_gpu_checks_script.py runs every benchmark command below on the CPU.
set -u
# LOGS, PY, stamp and the environment log, as every device script starts.
source "$(dirname "$0")/gpu_env.sh" "${1:-gpu-logs}"

# 1. A grid's runs sharing the GPU: K = 1 (before) against K = 2 ... 16 runs in one process, each
#    on its own stream (harness trainers driven in turn, and bare captured steps round robin).
stamp "pack"
timeout 80 $PY -m benchmark.bench.pack --device cuda --models resnet56 --k 1,2,4,8,16 \
    --iters 50 2>&1 | tee "$LOGS/pack.log"
timeout 45 $PY -m benchmark.bench.pack --device cuda --models vgg16,resnet18 --k 1,8 \
    --iters 40 2>&1 | tee -a "$LOGS/pack.log"

# 2. Before/after for ResNet-56 (bare loop, harness, masks, every method) and two more models.
stamp "bench"
timeout 115 $PY -m benchmark.bench --device cuda --iters 40 --repeats 1 --methods all \
    --models resnet18,vgg16 2>&1 | tee "$LOGS/bench.log"

# 3. The real pipeline: prunebench run, BIMP, 50,000 stand-in images, 5 epochs, fast modes (with
#    each epoch's wall-clock and the 200-epoch projection). The stand-in is written outside logs.
CIFAR=${TMPDIR:-/tmp}/prunebench-cifar
stamp "pipeline"
timeout 110 $PY -m benchmark.bench.pipeline --device cuda --epochs 5 --modes fast,fast-bf16 \
    --root "$CIFAR" 2>&1 | tee "$LOGS/pipeline.log"

# 4. Correctness, side by side: the fast path against eager for every method (deterministic
#    twice, resume); one epoch of each large model of the other problems on CUDA (MaxViT,
#    DeepLabV3, PSPNet, T5, on stand-ins); and the whole test suite on the GPU machine.
stamp "checks"
timeout 150 $PY -m benchmark.bench.check_fast_path >"$LOGS/check.log" 2>&1 &
CHECK=$!
timeout 150 bash benchmark/bench/gpu_model_epochs.sh "${TMPDIR:-/tmp}/prunebench-models" \
    >"$LOGS/models.log" 2>&1 &
MODELS=$!
timeout 150 $PY -m pytest -m "not slurm" -q -n 12 -p no:cacheprovider --timeout 120 \
    >"$LOGS/pytest.log" 2>&1
wait $CHECK
wait $MODELS
cat "$LOGS/check.log"
tail -25 "$LOGS/pytest.log"
cat "$LOGS/models.log"

# 5. Extras, alone again: 2:4 semi-structured MaxViT linears against dense.
stamp "speedup"
timeout 40 $PY -m benchmark.bench.speedup --device cuda --repeats 20 2>&1 | tee "$LOGS/extra.log"
stamp "done"
