#!/usr/bin/env bash
# Measure Llama-2-7B's Vidur-format profile on one NVIDIA H200 in a single run of under 7 minutes.
#
#   bench/measure_h200.sh [OUT_DIR] [WHEEL_DIR]
#
# OUT_DIR   where the profile goes (default data/profiles/h200/meta-llama/Llama-2-7b-hf; an existing
#           profile there is replaced). It receives mlp.csv.xz, attention.csv.xz and metadata.json.
# WHEEL_DIR optional: wheels to install before measuring, for a machine without network access
#           whose Python lacks this project's dependencies (there, only vidur is usually missing:
#           pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#               --platform manylinux2014_x86_64 -d WHEEL_DIR vidur==0.0.26).
#
# The grid: Vidur's own grids up to 4096 tokens, i.e. 259 num_tokens values for the MLP-side ops,
# 11,376 decode shapes (batch 1..128 then every 8th up to 256, x 79 KV sizes 32..4032) and 390
# prefill shapes (chunks 32..4096 at every chunk-aligned KV offset, plus whole prompts), in fp16,
# 3 warm-up and 10 timed runs each, every op timed as CUDA-graph replays (--timer graph) so that
# CPU launch gaps are not part of the times. With eager CUDA-event timing the whole grid took
# 184 s on an H200; capturing graphs adds per-shape work, so --time-budget 330 stops refining
# the grid after 5.5 minutes should it be slower, leaving a sparser profile that still spans the
# whole grid (shapes are measured coarse-to-fine, corners first).
set -euo pipefail
cd "$(dirname "$0")/.."

source bench/gpu_preamble.sh "$@"
start=$SECONDS
"$python" -m simulator.profiling.measure \
    --model meta-llama/Llama-2-7b-hf --out "$out" --overwrite --compress \
    --torch-device cuda --dtype float16 --attention-backend auto \
    --grid vidur --max-tokens 4096 --max-batch 256 --max-kv 4096 \
    --timer graph --warmup 3 --repeats 10 --time-budget 330
echo "measured in $((SECONDS - start)) s"
"$python" - "$out/metadata.json" <<'PY'
import json, sys
meta = json.load(open(sys.argv[1]))
print("timer:", meta["timer"], "| fallbacks:", len(meta["timer_fallbacks"]), "| measured:", meta["measured_shapes"], "| over budget:", meta["skipped_for_time_budget"])
for fallback in meta["timer_fallbacks"][:5]:
    print("  fallback:", fallback)
PY
ls -l "$out"
