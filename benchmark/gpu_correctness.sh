#!/usr/bin/env bash
# Device script (a), correctness (under 240 s of steps, side by side): the test
# suite on CUDA with one line per failure and the last lines of each failure's message kept
# in failures.txt as they happen (a run stopped at its limit prints no tracebacks); the fast
# path of every method against eager (check_fast_path); an array against its runs alone on
# the device (the grouped layout), its step uncompiled and compiled.
#
#   bash benchmark/gpu_wheels.sh                      # here, once: the wheels to carry (.whl)
#   bash benchmark/gpu_correctness.sh [LOG_DIR]       # on the GPU machine, .whl carried
#   # logs: env, pytest, failures.txt, check, equality, equality-compiled
#   # extra arguments after LOG_DIR go to pytest (test files or node ids: a rerun of some)
#
# Run it from the repository root, on a machine with one GPU.
# tests/bench/test_gpu_device_scripts.py runs every benchmark command below on the CPU.
set -u
source "$(dirname "$0")/gpu_env.sh" "${1:-gpu-logs}"

stamp "correctness"
export PRUNEBENCH_FAILURE_LOG="$LOGS/failures.txt"
: >"$PRUNEBENCH_FAILURE_LOG"
timeout 190 $PY -m benchmark.bench.check_fast_path >"$LOGS/check.log" 2>&1 &
CHECK=$!
# The array against its runs alone, its step captured uncompiled and compiled.
timeout 150 $PY -m benchmark.bench.array --device cuda --parts equality --layouts grouped \
    >"$LOGS/equality.log" 2>&1 &
EQUALITY=$!
timeout 190 $PY -m benchmark.bench.array --device cuda --parts equality --layouts grouped \
    --compile on >"$LOGS/equality-compiled.log" 2>&1 &
COMPILED=$!
timeout 200 $PY -m pytest -m "not slurm" -n 14 -p no:cacheprovider --timeout 150 -q \
    --tb=short -rfs "${@:2}" >"$LOGS/pytest.log" 2>&1
wait $CHECK
wait $EQUALITY
wait $COMPILED
stamp "done"
cat "$LOGS/check.log" "$LOGS/equality.log" "$LOGS/equality-compiled.log"
grep -E "^(FAILED|ERROR) " "$LOGS/pytest.log" | cut -c1-220
tail -3 "$LOGS/pytest.log"
echo "failures with messages: $(grep -c '^FAILED' "$LOGS/failures.txt")"
