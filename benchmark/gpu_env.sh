# Sourced by the device scripts (gpu_checks.sh, gpu_correctness.sh, gpu_speed.sh, ...): the log
# folder (first argument), the Python to run, a step timer, what a bare device machine lacks
# (the wheels benchmark/gpu_wheels.sh prepared in .whl, and the project itself, installed
# editable without network so that the `prunebench` command exists), and the machine's GPU,
# driver and torch in env.log.
LOGS=${1:-gpu-logs}
mkdir -p "$LOGS"
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
STEP_START=$(date +%s)
stamp() { echo "[$(( $(date +%s) - STEP_START )) s] $*"; }

if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/prunebench-site .whl/*.whl && export PYTHONPATH=/tmp/prunebench-site${PYTHONPATH:+:$PYTHONPATH}
fi
if ! command -v prunebench >/dev/null 2>&1; then
    $PY -m pip install -q --no-index --no-deps --no-build-isolation -e . >"${TMPDIR:-/tmp}/prunebench-install.log" 2>&1 \
        || { echo "installing the project failed:"; tail -5 "${TMPDIR:-/tmp}/prunebench-install.log"; }
fi

stamp "environment" | tee "$LOGS/env.log"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >>"$LOGS/env.log" 2>&1
$PY -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0], torch.cuda.get_device_name())" >>"$LOGS/env.log" 2>&1
echo "prunebench: $(command -v prunebench || echo missing); nproc $(nproc)" >>"$LOGS/env.log"
cat "$LOGS/env.log"
