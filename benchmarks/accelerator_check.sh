#!/usr/bin/env bash
# One run on a GPU or TPU (about 6 minutes on an H200 before step 4b, which adds one cold main job,
# about 1.5 minutes more: not yet measured; every step capped), writing one JSON:
#
#   bash benchmarks/accelerator_check.sh --purejaxrl PATH     # accelerator sizes -> accelerator_check/accelerator_check.json
#   bash benchmarks/accelerator_check.sh --quick              # tiny sizes, for a CPU (a few minutes on 2 cores)
#   bash benchmarks/accelerator_check.sh --out DIR            # another output folder
#   bash benchmarks/accelerator_check.sh --issue12            # also issue 12's throughput grid and host loop
#
# Steps (issue 49; each under its own time limit; a step that fails or runs out of time is
# recorded in steps.json and the others still run):
#   1. device report (jax version, backend, devices, device memory)
#   2. the sequential loop iterations of the default run's checkpoints (benchmarks/evaluation_steps.py;
#      traced, nothing compiled)
#   3. the default main job, empty persistent compilation cache (scripts/train_all_seeds.py --no-render)
#   4. the same again on the cache step 3 filled (warm)
#   5. the checkpoint-cost pair: swing alone, default checkpoints against --checkpoint-interval
#      100000000 (benchmarks/checkpoint_cost.py)
#   6. PureJaxRL's ppo.py on its CartPole settings against purehr at 5 and at 256 seeds
#      (benchmarks/peers.py; skipped without --purejaxrl PATH, a folder with PureJaxRL's ppo.py)
# then benchmarks/accelerator_summary.py writes the JSON with the goals of issues 12 and 49
# (H200: the main job <= 20 s cold with both goals met; purehr >= 1.2x PureJaxRL's steps/s at
# 5 and 256 seeds, first call no slower, returns no worse).
# The accelerator profile (issue 49, item 4; purehr.tasks.profiles): on a GPU/TPU the default
# --profile auto is "accelerator", so steps 3-4 run that profile (each manifest's
# run_config.values.profile says which); step 2 also counts its sequential iterations, and
# step 4b, main_cpu_profile, runs the main job with --profile cpu (the CPU defaults, the main
# job of before profiles) on the same cache for the comparison. PROFILE_FLAGS="..." adds words
# to every main job (steps 3, 4 and 4b).
set -u
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python}"
QUICK=0
ISSUE12=0
OUT=accelerator_check
PUREJAXRL=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --issue12) ISSUE12=1 ;;
    --out) OUT="$2"; shift ;;
    --purejaxrl) PUREJAXRL="$2"; shift ;;
    -h|--help) sed -n '2,29p' "$0"; exit 0 ;;
    *) echo "error: unknown argument $1; expected --quick, --issue12, --out DIR or --purejaxrl PATH" >&2; exit 2 ;;
  esac
  shift
done
if [ -n "$PUREJAXRL" ] && [ ! -f "$PUREJAXRL/ppo.py" ]; then
  echo "error: --purejaxrl $PUREJAXRL: expected a folder with PureJaxRL's ppo.py" >&2; exit 2
fi
if [ -e "$OUT/accelerator_check.json" ]; then
  echo "error: $OUT/accelerator_check.json exists; move it away or pass --out DIR" >&2; exit 2
fi
mkdir -p "$OUT"
STEPS_LOG="$OUT/steps.jsonl"; : > "$STEPS_LOG"
CACHE="$OUT/compile_cache"; rm -rf "$CACHE"

if [ "$QUICK" = 1 ]; then
  MAIN=(--tasks hrv --seeds 0 1 --steps 2048 --num-envs 8 --num-steps 64 --minibatch-size 128 --eval-episodes 8)
  COST=(--tasks hrv --seeds 0 --steps 4096 --extra --num-envs 8 --num-steps 64 --minibatch-size 128
        --eval-episodes 8 --checkpoint-interval 1024)
  EVAL_STEPS=(--tasks hrv --seeds 2)
  PEERS=(--seeds 2 --repeats 1)
  PEERS_WIDE=(--seeds 4 --repeats 1)
  GRID=(--tasks hrv --dtypes float32 --seeds 1 2 --envs 8 --modes training --num-steps 16
        --steps-per-seed 256 --hidden 16 --repeats 1)
  HOST=(--task hrv --steps 2048 --seeds 2)
  LIMITS=(60 120 240 240 300 240 240 240 180)
else
  MAIN=()
  COST=(--tasks swing)
  EVAL_STEPS=()
  PEERS=(--seeds 5 --repeats 2)
  PEERS_WIDE=(--seeds 256 --repeats 2)
  GRID=(--tasks hrv swing --dtypes float32 --seeds 1 5 32 --envs 2048 --modes training --num-steps 128
        --steps-per-seed 1048576 --repeats 2)
  HOST=(--task hrv --steps 262144 --seeds 5)
  LIMITS=(60 120 200 120 200 150 150 240 90)
fi

step() {   # step NAME LIMIT_S COMMAND...: run with a time limit, log exit status and seconds
  local name=$1 limit=$2; shift 2
  local started; started=$(date +%s)
  echo "== $name (limit ${limit} s): $*" >&2
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  local code=$?
  local seconds=$(( $(date +%s) - started ))
  echo "{\"step\": \"$name\", \"exit\": $code, \"seconds\": $seconds, \"timed_out\": $([ $code = 124 ] && echo true || echo false)}" >> "$STEPS_LOG"
  echo "   exit $code after $seconds s (log: $OUT/$name.log)" >&2
}

step device "${LIMITS[0]}" "$PYTHON" -c "
import json, platform, sys, jax
devices = jax.devices()
def memory(d):
    try:
        return d.memory_stats()
    except Exception:
        return None
report = {'jax': jax.__version__, 'backend': jax.default_backend(), 'platform': platform.platform(),
          'devices': [str(d) for d in devices], 'device_kind': devices[0].device_kind,
          'process_count': jax.process_count(), 'memory_stats': memory(devices[0])}
json.dump(report, open(sys.argv[1], 'w'), indent=1, default=str)
print(json.dumps(report, default=str))
" "$OUT/device.json"
step evaluation_steps "${LIMITS[1]}" "$PYTHON" benchmarks/evaluation_steps.py ${EVAL_STEPS[@]+"${EVAL_STEPS[@]}"} \
  --json "$OUT/evaluation_steps.json"
step evaluation_steps_accelerator "${LIMITS[1]}" "$PYTHON" benchmarks/evaluation_steps.py --profile accelerator \
  ${EVAL_STEPS[@]+"${EVAL_STEPS[@]}"} --json "$OUT/evaluation_steps_accelerator.json"
for temperature in cold warm; do
  # shellcheck disable=SC2086  # PROFILE_FLAGS are words
  step "main_$temperature" "${LIMITS[$([ $temperature = cold ] && echo 2 || echo 3)]}" "$PYTHON" \
    scripts/train_all_seeds.py --run-dir "$OUT/main_$temperature" --no-render --no-progress --overwrite \
    --compile-cache "$CACHE" ${MAIN[@]+"${MAIN[@]}"} ${PROFILE_FLAGS:-}
done
# shellcheck disable=SC2086  # PROFILE_FLAGS are words
step main_cpu_profile "${LIMITS[2]}" "$PYTHON" scripts/train_all_seeds.py --run-dir "$OUT/main_cpu_profile" \
  --no-render --no-progress --overwrite --compile-cache "$CACHE" ${MAIN[@]+"${MAIN[@]}"} --profile cpu \
  ${PROFILE_FLAGS:-}
step checkpoint_cost "${LIMITS[4]}" "$PYTHON" benchmarks/checkpoint_cost.py --json "$OUT/checkpoint_cost.json" "${COST[@]}"
if [ -n "$PUREJAXRL" ]; then
  step peers_narrow "${LIMITS[5]}" "$PYTHON" benchmarks/peers.py --configs purejaxrl:CartPole-v1 --purejaxrl "$PUREJAXRL" \
    "${PEERS[@]}" --json "$OUT/peers_narrow.json"
  step peers_wide "${LIMITS[6]}" "$PYTHON" benchmarks/peers.py --configs purejaxrl:CartPole-v1 --purejaxrl "$PUREJAXRL" \
    "${PEERS_WIDE[@]}" --json "$OUT/peers_wide.json"
else
  echo "   (no --purejaxrl PATH: the PureJaxRL comparison is skipped)" >&2
fi
if [ "$ISSUE12" = 1 ]; then
  step throughput "${LIMITS[7]}" "$PYTHON" benchmarks/throughput.py "${GRID[@]}" --json "$OUT/throughput.json"
  step host_loop "${LIMITS[8]}" "$PYTHON" benchmarks/host_loop_ppo.py "${HOST[@]}" --json "$OUT/host_loop.json"
fi

"$PYTHON" -c "
import json, sys
steps = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
json.dump({s['step']: s for s in steps}, open(sys.argv[2], 'w'), indent=1)
" "$STEPS_LOG" "$OUT/steps.json"
"$PYTHON" benchmarks/accelerator_summary.py "$OUT" --json "$OUT/accelerator_check.json"
echo "wrote $OUT/accelerator_check.json" >&2
