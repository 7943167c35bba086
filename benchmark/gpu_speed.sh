#!/usr/bin/env bash
# Device script (b) of issue 43, speed (under 240 s of steps on one H100/H200, each variant side
# by side in the same call): ResNet-56 arrays through the harness against the array's bare
# step (eager and captured in one CUDA graph), uncompiled and compiled (runtime.compile), in
# bf16, fp16 and fp32, with one run alone and packing beside; then one conv layer of K models
# each way (grouped, channels_last weights, K convolutions on one or several streams).
#
#   bash benchmark/gpu_wheels.sh                      # here, once: the wheels to carry (.whl)
#   bash benchmark/gpu_speed.sh [LOG_DIR]             # on the GPU machine, .whl carried
#   # logs: env, arrays, conv
#
# Run it from the repository root, on a machine with one GPU. Compiling the wide ResNet-56
# takes about a minute per precision (Inductor's caches make the second use of a graph fast).
# tests/bench/test_gpu_device_scripts.py runs every benchmark command below on the CPU.
set -u
source "$(dirname "$0")/gpu_env.sh" "${1:-gpu-logs}"
ARRAY="$PY -m benchmark.bench.array --device cuda --parts model --layouts grouped --core grouped"

stamp "arrays bf16"
timeout 35 $ARRAY --k 32,16,8 --pack-k 8 --modes fast-bf16 --compile off --iters 40 2>&1 \
    | tee "$LOGS/arrays.log"
timeout 75 $ARRAY --k 32 --pack-k 1 --modes fast-bf16 --compile on --iters 40 2>&1 \
    | tee -a "$LOGS/arrays.log"
stamp "arrays fp16, fp32"
timeout 70 $ARRAY --k 32 --pack-k 1 --modes fast-fp16 --compile on --iters 40 2>&1 \
    | tee -a "$LOGS/arrays.log"
timeout 20 $ARRAY --k 32 --pack-k 1 --modes fast --compile off --iters 30 2>&1 \
    | tee -a "$LOGS/arrays.log"
timeout 70 $ARRAY --k 32 --pack-k 1 --modes fast --compile on --iters 30 2>&1 \
    | tee -a "$LOGS/arrays.log"
stamp "conv"
timeout 30 $PY -m benchmark.bench.array_kernels --device cuda --parts conv --k 32 \
    --precisions fp16,bf16 --iters 10 2>&1 | tee "$LOGS/conv.log"
stamp "done"
