#!/usr/bin/env bash
# Device script (b), speed (about 240 s of steps on one H100/H200, each variant side
# by side in the same call): ResNet-56 arrays of K = 32 runs through the harness against the
# array's bare step captured in one CUDA graph, uncompiled (with one run alone and the eager
# bare step beside) and compiled (runtime.compile = "on"), in bf16 and fp32.
#
#   bash benchmark/gpu_wheels.sh                      # here, once: the wheels to carry (.whl)
#   bash benchmark/gpu_speed.sh [LOG_DIR]             # on the GPU machine, .whl carried
#   # logs: env, arrays
#
# Run it from the repository root, on a machine with one GPU. Compiling the wide ResNet-56
# takes about a minute per precision (measured on an H200: a compiled table did not finish in
# 75 s with its baselines); the harness and the bare step share Inductor's caches. Not in this
# script (their own calls): fp16 (`--modes fast-fp16`), other K, and one conv layer of K models
# each way (`python -m benchmark.bench.array_kernels --parts conv`).
# tests/bench/test_gpu_device_scripts.py runs every benchmark command below on the CPU.
set -u
source "$(dirname "$0")/gpu_env.sh" "${1:-gpu-logs}"

stamp "arrays bf16, uncompiled"
timeout 35 $PY -m benchmark.bench.array --device cuda --parts model --layouts grouped \
    --core grouped --k 32 --pack-k 1 --modes fast-bf16 --compile off --iters 40 2>&1 \
    | tee "$LOGS/arrays.log"
stamp "arrays bf16, compiled"
timeout 105 $PY -m benchmark.bench.array --device cuda --parts model --layouts grouped \
    --core grouped --k 32 --modes fast-bf16 --compile on --no-baselines --iters 40 2>&1 \
    | tee -a "$LOGS/arrays.log"
stamp "arrays fp32, compiled"
timeout 100 $PY -m benchmark.bench.array --device cuda --parts model --layouts grouped \
    --core grouped --k 32 --modes fast --compile on --no-baselines --iters 30 2>&1 \
    | tee -a "$LOGS/arrays.log"
stamp "done"
