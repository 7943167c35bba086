#!/usr/bin/env bash
# The language-model GPU checks, as one prepared script (under 600 s on one H100/H200): the
# peak device memory of a one-shot Wanda prune of a random Llama-2-7B-shaped model in float16
# (128 calibration windows of 4096 tokens, as Wanda prunes Llama-2), offloaded one decoder layer
# at a time and whole on the device, each beside the harness's estimate; both must print the
# same test perplexity. Then the language-model tests on the GPU machine.
#
#   bash benchmark/gpu_llm.sh [LOG_DIR]
#   # logs: env, llm (the two prunes), pytest
#
# The random model (13.5 GB) is written once to ${TMPDIR:-/tmp}/prunebench-7b and reused.
# tests/bench/test_gpu_llm_script.py checks that the benchmark accepts the arguments below.
set -u
source "$(dirname "$0")/gpu_env.sh" "${1:-gpu-logs}"
MODEL=${TMPDIR:-/tmp}/prunebench-7b

stamp "offloaded"
timeout 260 $PY -m benchmark.bench.llm_memory --shape 7b --dtype float16 --method wanda \
    --device cuda --length 4096 --samples 128 --offload on --model-dir "$MODEL" \
    2>&1 | tee "$LOGS/llm.log"
stamp "whole"
timeout 170 $PY -m benchmark.bench.llm_memory --shape 7b --dtype float16 --method wanda \
    --device cuda --length 4096 --samples 128 --offload off --model-dir "$MODEL" \
    2>&1 | tee -a "$LOGS/llm.log"
stamp "tests"
timeout 120 $PY -m pytest tests/language -q -p no:cacheprovider >"$LOGS/pytest.log" 2>&1
tail -5 "$LOGS/pytest.log"
stamp "done"
