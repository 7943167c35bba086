#!/usr/bin/env bash
# The array session's GPU script (issue 34), one device call of at most 600 s (about 10 minutes,
# ~12 with the machine's start): first the essentials of benchmark/gpu_checks.sh that issue 28
# left unverified (the suite on CUDA, the fast path of every method, one epoch of each large
# model, the GPU loader against the synthetic rate), then the array benchmark (one conv layer
# grouped / separate / vmap; ResNet-56 arrays at K = 1..32 in bf16 and fp32 against packing and
# one run; the equality check of an array against its runs alone on the GPU).
#
#   bash benchmark/gpu_array_checks.sh [LOG_DIR]
#   # logs (8 files at most, what one device call brings back):
#   #   env, check, pytest, models, pipeline, layer, arrays, equality
#
# Run it from the repository root with the project installed (or PYTHONPATH=.), on a machine
# with one GPU. Each step has its own time limit; the limits add up to 545 s.
# tests/bench/test_gpu_array_script.py runs every benchmark command below on the CPU.
# This workplace's device image lacks tomli-w, submitit, torch-pruning and pycocotools: carry
# their wheels and put them on PYTHONPATH (benchmark/bench/README.md, runs as one array model).
set -u
# LOGS, PY, stamp and the environment log, as every device script starts.
source "$(dirname "$0")/gpu_env.sh" "${1:-gpu-logs}"

# 1. Essentials of gpu_checks.sh, side by side: the fast path against eager for every method,
#    one epoch of each large model (MaxViT, DeepLabV3, PSPNet, T5 on stand-ins), the test suite
#    on the GPU machine (one line per test, so a run stopped at its limit still names failures).
stamp "checks"
timeout 180 $PY -m benchmark.bench.check_fast_path >"$LOGS/check.log" 2>&1 &
CHECK=$!
timeout 180 bash benchmark/bench/gpu_model_epochs.sh "${TMPDIR:-/tmp}/prunebench-models" \
    >"$LOGS/models.log" 2>&1 &
MODELS=$!
timeout 180 $PY -m pytest -m "not slurm" -v -n 14 -p no:cacheprovider --timeout 120 \
    --tb=line -rf >"$LOGS/pytest.log" 2>&1
wait $CHECK
wait $MODELS
cat "$LOGS/check.log"
grep -E "(FAILED|ERROR) tests/" "$LOGS/pytest.log" | head -40
echo "pytest: $(grep -c "PASSED tests/" "$LOGS/pytest.log") passed lines"
grep -E "^FAILED|^E |passed|failed" "$LOGS/pytest.log" | tail -60
cat "$LOGS/models.log"

# 2. The GPU loader: BIMP on 50,000 stand-in images, 3 epochs, against the synthetic rate.
CIFAR=${TMPDIR:-/tmp}/prunebench-cifar
stamp "pipeline"
timeout 45 $PY -m benchmark.bench.pipeline --device cuda --epochs 3 --modes fast-bf16 \
    --root "$CIFAR" 2>&1 | tee "$LOGS/pipeline.log"

# 3. Arrays: one conv layer at ResNet-56's shapes, K = 1..32, grouped / separate / vmap.
stamp "layer"
timeout 40 $PY -m benchmark.bench.array --device cuda --parts layer --k 1,2,4,8,16,32 \
    --iters 20 2>&1 | tee "$LOGS/layer.log"

# 4. Arrays: whole ResNet-56 at K = 32 down to 1 (the large K first, in case the limit stops
#    it): the harness's arrays (vmap and grouped layouts) against packing and one run, and the
#    array's bare iteration eager and captured in a CUDA graph (--core); bf16, then fp32.
stamp "arrays"
timeout 130 $PY -m benchmark.bench.array --device cuda --parts model --k 32,16,8,4,2,1 \
    --pack-k 1,4,16 --layouts vmap,grouped --core grouped --modes fast-bf16 --iters 10 2>&1 \
    | tee "$LOGS/arrays.log"
timeout 90 $PY -m benchmark.bench.array --device cuda --parts model --k 32,16,8,4,2,1 \
    --pack-k 16 --layouts grouped --core grouped --modes fast --iters 10 2>&1 \
    | tee -a "$LOGS/arrays.log"

# 5. Arrays: four runs alone against the same runs as one array, on the GPU.
stamp "equality"
timeout 60 $PY -m benchmark.bench.array --device cuda --parts equality --layouts grouped 2>&1 \
    | tee "$LOGS/equality.log"
stamp "done"
