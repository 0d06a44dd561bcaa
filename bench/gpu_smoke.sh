#!/usr/bin/env bash
# GPU smoke run of the two-stage recipe on Search-v0: oracle export (train split), `agent-train sft`,
# then GRPO from the SFT checkpoint with the transformers backend and, where vLLM is installed, the
# vLLM backend; held-out (test split) success before and after GRPO. Before GRPO it checks that
# pushed weights really reach the generator: the same seeded request must change after perturbed
# weights are pushed, and come back exactly when the original weights are pushed again.
# Needs a CUDA GPU; about 10 minutes. Not part of CI (no GPU there).
#
#   bash bench/gpu_smoke.sh                       # random-init ~0.5B Llama (24 layers x 896)
#   MODEL=/models/Qwen2.5-0.5B-Instruct bash bench/gpu_smoke.sh   # a local ~0.5B checkpoint folder
#   STEPS=4 SFT_EPISODES=512 OUT_DIR=/tmp/smoke bash bench/gpu_smoke.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
MODEL=${MODEL:-tiny:24x896}
STEPS=${STEPS:-3}
SFT_EPISODES=${SFT_EPISODES:-256}
OUT=${OUT_DIR:-$(mktemp -d /tmp/agentrl-gpu-smoke.XXXX)}
export TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
ENV_ID=agentrl/Search-v0
ENV_KWARGS='{"max_turns": 2}'

"$PY" - <<'PY'
import torch
if not torch.cuda.is_available():
    raise SystemExit("gpu_smoke: no CUDA GPU visible to torch")
print(f"gpu_smoke: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
PY

echo "== oracle episodes ($SFT_EPISODES train seeds) =="
"$PY" -c "
from agentrl.agent_train.search_oracle import export_search_sft
print(export_search_sft('$OUT/oracle.jsonl', range($SFT_EPISODES), {'max_turns': 2}, split='train'))"

echo "== SFT =="
start=$SECONDS
"$PY" -m agentrl.agent_train.cli sft --data "$OUT/oracle.jsonl" --model "$MODEL" --env "$ENV_ID" \
    --out-dir "$OUT/sft" --epochs 3 --lr 1e-4 --micro-batch 16 --device cuda --no-progress | tail -8
echo "sft wall: $((SECONDS - start)) s"

backends=(hf)
if "$PY" -c "import vllm" 2>/dev/null; then backends+=(vllm); else echo "== vllm: not installed, hf only =="; fi

for backend in "${backends[@]}"; do
    echo "== $backend: pushed weights reach the generator =="
    BACKEND=$backend CKPT="$OUT/sft/checkpoint" WORK="$OUT/sync-$backend" "$PY" - <<'PY'
import asyncio, os, pathlib, torch
from agentrl.agent_train.config import TrainConfig
from agentrl.agent_train.models import load_pretrained
from agentrl.agent_train.train import make_backend

policy, tok = load_pretrained(os.environ["CKPT"], "cuda")
cfg = TrainConfig(backend=os.environ["BACKEND"], out_dir=os.environ["WORK"], temperature=1.0)
backend = make_backend(cfg, policy, tok, "cuda")
text = tok.apply_chat_template([{"role": "user", "content": "Name a city."}], tokenize=False, add_generation_prompt=True)
prompt = tok.encode(text, add_special_tokens=False)

async def sample():
    try:
        return await backend.generate(list(prompt), 24, seed=1234)
    finally:
        if hasattr(backend, "aclose"):
            await backend.aclose()

original = {k: v.detach().clone() for k, v in policy.state_dict().items()}
first = asyncio.run(sample())
again = asyncio.run(sample())
assert first.ids == again.ids, "a seeded request must repeat under the same weights"
perturbed = {k: v + 0.05 * torch.randn_like(v) if v.is_floating_point() else v for k, v in original.items()}
backend.update_weights(perturbed, 1)
changed = asyncio.run(sample())
assert (changed.ids, changed.logprobs) != (first.ids, first.logprobs), "pushed weights did not reach the generator"
backend.update_weights(original, 2)
back = asyncio.run(sample())
assert back.ids == first.ids, "pushing the original weights back did not restore generation"
print(f"weights sync: ok (version {back.version}; {len(first.ids)} tokens, changed after the push, restored after)")
PY
    echo "== $backend: GRPO from the SFT checkpoint, $STEPS steps =="
    start=$SECONDS
    timeout 900 "$PY" -m agentrl.agent_train.cli --env "$ENV_ID" --env-kwargs "$ENV_KWARGS" \
        --model "$OUT/sft/checkpoint" --backend "$backend" --device cuda --bf16 --steps "$STEPS" \
        --groups-per-step 16 --group-size 8 --max-new-tokens 32 --token-budget 1024 --micro-batch 16 \
        --lr 1e-6 --eval-seeds 200 --eval-k 1 --max-idle-steps 0 --no-tensorboard --no-progress \
        --out-dir "$OUT/grpo-$backend" > "$OUT/grpo-$backend.log" 2>&1 \
        || { echo "FAILED ($backend); last lines:"; tail -30 "$OUT/grpo-$backend.log"; exit 1; }
    grep -E "^(eval before|eval after|tasks:)" "$OUT/grpo-$backend.log" | cut -c1-160
    echo "wall: $((SECONDS - start)) s"
    "$PY" - "$OUT/grpo-$backend/metrics.csv" <<'PY'
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r.get("step_s")]
print(f"{'step':>4} {'gen tok/s':>10} {'rollout s':>10} {'train s':>8} {'reward':>7} {'trained':>8}")
for r in rows:
    print(f"{r['step']:>4} {float(r['gen_tokens_per_s']):>10.0f} {float(r['rollout_s']):>10.2f} "
          f"{float(r['train_s']):>8.2f} {float(r['reward_mean']):>7.3f} {float(r['trained_samples']):>8.0f}")
PY
done
echo "outputs in $OUT"
