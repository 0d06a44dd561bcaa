#!/usr/bin/env bash
# GPU smoke run of agent-train: a few GRPO steps of a random-init ~0.5B Llama (28 layers x 1024,
# tokenizer trained on the env's texts) on Flights-v0, with the transformers backend and, when vLLM
# is installed, the vLLM backend; prints generation tokens/s and step times. Needs a CUDA GPU;
# finishes in under 8 minutes. Not part of CI. Groups with equal rewards are kept (zero advantage)
# so that every step runs the full backward pass even while a random model earns nothing.
#
#   bash bench/gpu_smoke.sh      (ENV=agentrl/Echo-v0 STEPS=2 MODEL=tiny:24x896 change the defaults)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
ENV_ID=${ENV:-agentrl/Flights-v0}
STEPS=${STEPS:-3}
MODEL=${MODEL:-tiny:28x1024}
DEVICE=${DEVICE:-cuda}  # DEVICE=cpu MODEL=tiny:2x64 checks the script itself on a machine without a GPU
OUT=${OUT_DIR:-$(mktemp -d /tmp/agentrl-gpu-smoke.XXXX)}
export TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1

DEVICE=$DEVICE "$PY" - <<'PY'
import os, torch
if os.environ["DEVICE"] == "cpu":
    raise SystemExit(0)
if not torch.cuda.is_available():
    raise SystemExit("gpu_smoke: no CUDA GPU visible to torch")
print(f"gpu_smoke: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
PY

run() {  # $1 = backend, $2 = seconds allowed
    local backend=$1
    echo "== $backend backend: $STEPS GRPO steps on $ENV_ID =="
    local start=$SECONDS
    timeout "$2" "$PY" -m agentrl.agent_train.cli --env "$ENV_ID" --env-kwargs '{"max_turns": 4}' \
        --model "$MODEL" --backend "$backend" --device "$DEVICE" --bf16 --steps "$STEPS" \
        --groups-per-step 4 --group-size 8 --max-new-tokens 96 --token-budget 6144 --micro-batch 4 \
        --lr 1e-6 --zero-variance keep --eval-seeds 4 --eval-k 2 --no-tensorboard --no-progress --out-dir "$OUT/$backend" \
        > "$OUT/$backend.log" 2>&1 || { echo "FAILED ($backend); last lines:"; tail -30 "$OUT/$backend.log"; return 1; }
    echo "wall: $((SECONDS - start)) s (model build, eval before/after, checkpoint included)"
    "$PY" - "$OUT/$backend/metrics.csv" <<'PY'
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r.get("step_s")]
print(f"{'step':>4} {'gen tok/s':>10} {'rollout s':>10} {'train s':>8} {'step s':>7} {'tokens':>7} {'reward':>7}")
for r in rows:
    print(f"{r['step']:>4} {float(r['gen_tokens_per_s']):>10.0f} {float(r['rollout_s']):>10.2f} "
          f"{float(r['train_s']):>8.2f} {float(r['step_s']):>7.2f} {float(r['tokens_generated']):>7.0f} "
          f"{float(r['reward_mean']):>7.3f}")
PY
}

status=0
run hf 300 || status=1
if "$PY" -c "import vllm" 2>/dev/null; then
    run vllm 150 || status=1
else
    echo "== vllm backend: skipped (vllm not installed) =="
fi
echo "outputs in $OUT"
exit $status
