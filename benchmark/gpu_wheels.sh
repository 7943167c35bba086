#!/usr/bin/env bash
# Prepares what a device call must carry: wheels of the project's dependencies that
# the device image lacks (it reaches no package index), for its Python 3.12 on x86-64 Linux.
#
#   bash benchmark/gpu_wheels.sh [DIR]        # default .whl (git ignores it)
#
# Then each device call carries DIR and the device scripts install it (gpu_env.sh does, when
# the folder is there): no network is needed there.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-.whl}
mkdir -p "$DIR"
# Missing on the image (its package list: /work/.library/device/KINDS.md); their own needs
# (numpy, torch, cloudpickle, typing-extensions) are there.
WHEELS=(tomli-w==1.2.0 submitit==1.5.3 torch-pruning==1.6.1 pycocotools==2.0.10)
PLATFORMS=()
for tag in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 \
    manylinux2014_x86_64 manylinux1_x86_64; do
    PLATFORMS+=(--platform "$tag")
done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp "${PLATFORMS[@]}" -d "$DIR" "${WHEELS[@]}"
ls -1 "$DIR"
