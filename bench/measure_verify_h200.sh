#!/usr/bin/env bash
# Measure verify steps of Llama-2-7B on one NVIDIA H200 and fit lambda, in one run (estimated 2-3 minutes
# of measuring, not yet timed; the measuring stops refining its grid after 4 minutes whatever happens,
# so the whole script stays under 6).
#
#   bash bench/measure_verify_h200.sh [OUT_DIR] [WHEEL_DIR]
#
# OUT_DIR   default data/profiles/h200/meta-llama/Llama-2-7b-hf, next to the measured Vidur-format
#           profile (left as it is). It receives verify_attention.csv.xz, verify_layer.csv.xz,
#           verify_metadata.json, and the fitted lambda in verify_fit.json (bounds from the same
#           run) and verify_fit_profile.json (bounds from the profile's decode rows, if present).
# WHEEL_DIR optional: wheels to install first, for a machine without network access (see
#           bench/measure_h200.sh).
#
# The grid: batch 1, 2, 4, ..., 128 x KV 128, 256, ..., 4096 x k' = 0..8 (q = k' + 1 queries per
# sequence): 432 verify steps, each timed as attention alone (SDPA's flash and efficient kernels
# both timed, the faster kept: --attention-backend fastest) and as a whole decoder layer (with the
# kernel its attention kept), plus the one-query attention rows of
# both bounds (per_token needs batches up to 128 x 9 = 1152): 1,080 shapes, fp16, CUDA-graph
# replays, 3 warm-up and 10 timed runs each. K/V for the largest bound row take 77 GB.
set -euo pipefail
cd "$(dirname "$0")/.."

source bench/gpu_preamble.sh "$@"
start=$SECONDS
"$python" -m simulator.profiling measure \
    --model meta-llama/Llama-2-7b-hf --out "$out" --overwrite --compress --tables verify \
    --torch-device cuda --dtype float16 --attention-backend fastest \
    --max-batch 128 --max-kv 4096 --verify-max-k 8 \
    --timer graph --warmup 3 --repeats 10 --time-budget 240
echo "measured in $((SECONDS - start)) s"
"$python" - "$out/verify_metadata.json" <<'PY'
import json, sys
meta = json.load(open(sys.argv[1]))
print("timer:", meta["timer"], "| fallbacks:", len(meta["timer_fallbacks"]), "| backends:", meta["attention_backends"])
print("measured:", meta["measured_shapes"], "| over budget:", meta["skipped_for_time_budget"], "| skipped:", len(meta["skipped"]))
for item in meta["timer_fallbacks"][:3] + meta["skipped"][:3]:
    print("  ", item)
PY
"$python" -m simulator.profiling fit-verify --profile-dir "$out" --json "$out/verify_fit.json"
if ls "$out"/attention.csv* >/dev/null 2>&1; then
    "$python" -m simulator.profiling fit-verify --profile-dir "$out" --decode-profile "$out" --json "$out/verify_fit_profile.json" | head -1
fi
ls -l "$out"
echo "total $((SECONDS - start)) s"
