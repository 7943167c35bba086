#!/usr/bin/env bash
# One dense epoch of each large model of the paper's other problems, on stand-in data, on CUDA:
# MaxViT-T (ImageNet), DeepLabV3-ResNet-50 (COCO), PSPNet-ResNet-101 (CityScapes), T5-small
# (WMT16). Checks that they train and evaluate there; the figures are not timings.
#
#   bash benchmark/bench/gpu_model_epochs.sh WORK_DIR [DEVICE] [NAMES]
#   # DEVICE: cuda (default) or cpu; NAMES: which of "maxvit deeplabv3 pspnet t5" (default: all)
#
# tests/bench/test_gpu_checks_script.py runs it on the CPU with the tiny stand-in models
# (PRUNEBENCH_EPOCH_MODELS names the four models to use).
set -u -o pipefail
WORK=${1:?usage: gpu_model_epochs.sh WORK_DIR [DEVICE]}
DEVICE=${2:-cuda}
ONLY=" ${3:-maxvit deeplabv3 pspnet t5} "
PY=${PYTHON:-python3}
read -r MAXVIT DEEPLAB PSPNET T5 <<<"${PRUNEBENCH_EPOCH_MODELS:-maxvit_t deeplabv3_resnet50 pspnet_resnet101 t5_small}"
mkdir -p "$WORK"
cd "$WORK" || exit 1
STATUS=0
for set in imagenet coco cityscapes wmt16; do
    $PY -m benchmark.cli fake-data "$set" --root "data/$set" --size 64 >/dev/null || STATUS=1
done
epoch() {  # NAME DATASET MODEL [more overrides]
    local name=$1 data=$2 model=$3
    shift 3
    [[ "$ONLY" == *" $name "* ]] || return 0
    echo "== $name ($model, $data, $DEVICE) starts at $(date +%T)"
    if $PY -m benchmark.cli run --set data.name="$data" --set data.root="data/$data" \
        --set model.name="$model" --set method.name=dense --set budget.epochs=1 \
        --set runtime.device="$DEVICE" --set logging.progress=false "$@" 2>&1; then
        echo "== $name: PASS"
    else
        echo "== $name: FAIL"
        STATUS=1
    fi
}
epoch maxvit imagenet "$MAXVIT" --set data.batch_size=16
epoch deeplabv3 coco "$DEEPLAB" --set data.batch_size=4
epoch pspnet cityscapes "$PSPNET" --set data.batch_size=4
epoch t5 wmt16 "$T5" --set data.batch_size=8
exit $STATUS
