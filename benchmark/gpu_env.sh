# Sourced by the device scripts (gpu_checks.sh, gpu_array_checks.sh): the log folder (first
# argument), the Python to run, a step timer, and the machine's GPU, driver and torch in env.log.
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
