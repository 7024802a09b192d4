# Sourced by the GPU measurement scripts (bench/measure_*_h200.sh): the output folder, an optional
# folder of wheels to install beside the checkout (the device machine has no index), the GPU and
# PyTorch in use, and a clear stop when PyTorch sees no CUDA device.
#   usage inside a script:  source "$(dirname "$0")/gpu_preamble.sh" "$@"
out=${1:-data/profiles/h200/meta-llama/Llama-2-7b-hf}
wheels=${2:-}
python=${PYTHON:-python3}

if [ -n "$wheels" ]; then
    site=$(mktemp -d)
    "$python" -m pip install -q --no-index --no-deps --no-compile --target "$site" "$wheels"/*.whl
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
fi

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv || true
"$python" - <<'PY'
import sys, torch
if not torch.cuda.is_available():
    sys.exit("PyTorch sees no CUDA device: this script measures a GPU")
print("torch", torch.__version__, "CUDA", torch.version.cuda, torch.cuda.get_device_name())
PY

export PYTHONUNBUFFERED=1
