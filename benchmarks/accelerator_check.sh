#!/usr/bin/env bash
# One run on a GPU or TPU (at most 10 minutes), writing one JSON:
#
#   bash benchmarks/accelerator_check.sh                  # accelerator sizes -> accelerator_check/accelerator_check.json
#   bash benchmarks/accelerator_check.sh --quick          # tiny sizes, for a CPU (7 min on the shared 2-core CPU)
#   bash benchmarks/accelerator_check.sh --out DIR        # another output folder
#
# Steps (each under its own time limit; a step that fails or runs out of time is recorded in
# steps.json and the others still run):
#   1. device report (jax version, backend, devices, device memory)
#   2. throughput grid: training, 1, 5 and 32 seeds x 2,048 envs, swing and hrv
#      (benchmarks/throughput.py); also gives 5 seeds vs 1 seed wall time
#   3. the one-scan trainer vs the host-loop PPO (benchmarks/host_loop_ppo.py, hrv, 5 seeds)
#   4. the default protocol at full budget (scripts/train_all_seeds.py, no rendering)
# then benchmarks/accelerator_summary.py writes the JSON with the goals of issue 12
# (H200: >= 10M hrv steps/s at 32 x 2,048; 5 seeds <= 1.2x one seed; one scan >= 3x host loop).
set -u
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python}"
QUICK=0
OUT=accelerator_check
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --out) OUT="$2"; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "error: unknown argument $1; expected --quick or --out DIR" >&2; exit 2 ;;
  esac
  shift
done
if [ -e "$OUT/accelerator_check.json" ]; then
  echo "error: $OUT/accelerator_check.json exists; move it away or pass --out DIR" >&2; exit 2
fi
mkdir -p "$OUT"
STEPS_LOG="$OUT/steps.jsonl"; : > "$STEPS_LOG"

if [ "$QUICK" = 1 ]; then
  GRID=(--tasks hrv --dtypes float32 --seeds 1 2 --envs 8 --modes training --num-steps 16
        --steps-per-seed 256 --hidden 16 --repeats 1)
  HOST=(--task hrv --steps 2048 --seeds 2)
  PROTOCOL=(--tasks hrv --seeds 0 1 --steps 2048 --num-envs 8 --num-steps 64 --minibatch-size 128
            --eval-episodes 8)
  LIMITS=(60 240 180 240)
else
  GRID=(--tasks hrv swing --dtypes float32 --seeds 1 5 32 --envs 2048 --modes training --num-steps 128
        --steps-per-seed 1048576 --repeats 2)
  HOST=(--task hrv --steps 262144 --seeds 5)
  PROTOCOL=()
  LIMITS=(60 240 90 180)
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
step throughput "${LIMITS[1]}" "$PYTHON" benchmarks/throughput.py "${GRID[@]}" --json "$OUT/throughput.json"
step host_loop "${LIMITS[2]}" "$PYTHON" benchmarks/host_loop_ppo.py "${HOST[@]}" --json "$OUT/host_loop.json"
step protocol "${LIMITS[3]}" "$PYTHON" scripts/train_all_seeds.py --run-dir "$OUT/protocol" --no-render \
  --no-progress --overwrite "${PROTOCOL[@]}"

"$PYTHON" -c "
import json, sys
steps = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
json.dump({s['step']: s for s in steps}, open(sys.argv[2], 'w'), indent=1)
" "$STEPS_LOG" "$OUT/steps.json"
"$PYTHON" benchmarks/accelerator_summary.py "$OUT" --json "$OUT/accelerator_check.json"
echo "wrote $OUT/accelerator_check.json" >&2
