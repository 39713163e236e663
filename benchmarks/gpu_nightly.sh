#!/usr/bin/env bash
# The nightly on a GPU, from the working tree, in one command:
#
#     benchmarks/gpu_nightly.sh OUT_DIR
#
# Records a golden on the device and runs the nightly (candidate shapes up to k = 32 on a
# GPU) twice: with the numeric settings a release uses (cudnn.benchmark off, deterministic
# on, TF32 off) and with a speed-minded deployment's (cudnn.benchmark on, TF32 on). Writes
# both reports, both JUnit files and OUT_DIR/summary.md (+ summary.json): per profile, OP and
# shape: bitwise?, max abs, max ULP, flips, verdict, blocks/s, speedup, peak memory; and how
# far the speed profile's own golden is from the release golden.
#
# Runs without installing anything (PYTHONPATH=<repo>): it needs torch, numpy, pyarrow, typer, pydantic, scipy,
# rich, matplotlib and jinja2, as the GPU image has. Without a GPU it runs the same job on the
# CPU with the small model (that is how CI tests this script).
#
# Then the harness's own cost (benchmarks/bench_harness_cost.py: the null network at full geometry,
# record/run/score/promote/report at COST_BLOCKS blocks) against the network time per window this
# machine just measured (the release nightly's largest shape): OUT_DIR/harness_cost.{txt,json} and a
# section of summary.md give the real overhead fraction.
#
# Then whether the harness keeps the device busy (issue 25; benchmarks/bench_device_busy.py, BUSY_BLOCKS
# blocks, commands run, golden record, nightly): with the simulated device (the null network that
# sleeps C0 + C1 x windows per call: this host's CPUs against an assumed device) and with the real
# device (lanes/device_timeline.py wraps MODEL and times each call with CUDA events): busy fraction
# (device busy / lanes span), command share (lanes span / wall), harness share, peak RSS, in
# OUT_DIR/device_busy_{simulated,device}.{txt,json} and a section of summary.md.
#
# On CUDA, whether the copy of request n+1 overlaps the compute of request n (benchmarks/gpu_copy_overlap.py:
# staged vs unstaged, from a torch.profiler trace): OUT_DIR/copy_overlap.{txt,json}.
#
# Environment overrides: DEVICE (cuda:0 | cpu), MODEL (full | small | spec), BLOCKS, SHAPES
# (e.g. 2,4,8,16,32), COST_BLOCKS (e.g. 256,1024; empty: skip the cost benchmark, the CPU default),
# BUSY_BLOCKS (e.g. 256,1024; empty: skip the busy benchmark, the CPU default), BUSY_REPEATS (3),
# ARRANGEMENTS (per candidate shape, [evidence] arrangements: 3), PYTHON. Exit status: the release
# profile's nightly status (0 = every shape promoted and the
# golden reproduced); the speed profile and the cost and busy benchmarks are informative.
set -euo pipefail

OUT=${1:?usage: benchmarks/gpu_nightly.sh OUT_DIR}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-python3}
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 MPLBACKEND=Agg
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

DEVICE=${DEVICE:-$("$PY" -c 'import torch; print("cuda:0" if torch.cuda.is_available() else "cpu")')}
if [[ $DEVICE == cuda* ]]; then
  MODEL=${MODEL:-full}; BLOCKS=${BLOCKS:-48}; SHAPES=${SHAPES:-2,4,8,16,32}; COST_BLOCKS=${COST_BLOCKS-256,1024}
  BUSY_BLOCKS=${BUSY_BLOCKS-256,1024}
else
  MODEL=${MODEL:-small}; BLOCKS=${BLOCKS:-16}; SHAPES=${SHAPES:-2,4}; COST_BLOCKS=${COST_BLOCKS-}
  BUSY_BLOCKS=${BUSY_BLOCKS-}
fi
BUSY_REPEATS=${BUSY_REPEATS:-3}
ARRANGEMENTS=${ARRANGEMENTS:-3}
echo "gpu_nightly: device $DEVICE, model $MODEL, $BLOCKS blocks, shapes $SHAPES, output $OUT"
"$PY" - <<PYEOF
import torch, numpy, sys
print(f"python {sys.version.split()[0]}, torch {torch.__version__} (CUDA {torch.version.cuda}), numpy {numpy.__version__}")
if torch.cuda.is_available():
    print("device:", torch.cuda.get_device_name(0))
PYEOF

harness() { "$PY" -m harness.cli "$@"; }

write_config() {  # profile, numerics table
  local profile=$1 numerics=$2
  mkdir -p "$OUT/$profile"
  cat >"$OUT/$profile/harness.toml" <<TOML
[release]
name = "gpu-nightly-$profile"
device = "$DEVICE"
[model]
spec = "$MODEL"
[shapes]
candidates = [$SHAPES]
[corpus]
blocks = $BLOCKS
[evidence]
arrangements = $ARRANGEMENTS
[numerics]
$numerics
TOML
}

write_config release 'cudnn_benchmark = false
cudnn_deterministic = true
deterministic_algorithms = true
allow_tf32 = false
matmul_precision = "highest"'
write_config speed 'cudnn_benchmark = true
cudnn_deterministic = false
deterministic_algorithms = false
allow_tf32 = true
matmul_precision = "high"'

status=0
for profile in release speed; do
  start=$(date +%s)
  cfg="$OUT/$profile/harness.toml"
  rm -rf "$OUT/$profile/goldens" "$OUT/$profile/nightly"
  harness golden record --config "$cfg" --goldens "$OUT/$profile/goldens" --no-progress
  rc=0
  harness nightly --config "$cfg" --golden "$OUT/$profile/goldens/gpu-nightly-$profile" \
    --out "$OUT/$profile/nightly" --no-progress || rc=$?
  echo "gpu_nightly: profile $profile finished in $(( $(date +%s) - start )) s with exit status $rc"
  if [[ $profile == release ]]; then status=$rc; fi
  if (( rc > 1 )); then echo "gpu_nightly: profile $profile could not run (exit $rc)"; exit "$rc"; fi
done

if [[ -n $COST_BLOCKS ]]; then
  start=$(date +%s)
  runs=("$OUT"/release/nightly/runs/*/)
  rm -rf "$OUT/harness_cost"
  "$PY" "$REPO/benchmarks/bench_harness_cost.py" --blocks "$COST_BLOCKS" --network-from "${runs[0]%/}" \
    --workdir "$OUT/harness_cost" --json "$OUT/harness_cost.json" | tee "$OUT/harness_cost.txt" \
    || echo "gpu_nightly: the cost benchmark failed (informative; the verdict stands)"
  rm -rf "$OUT/harness_cost"
  echo "gpu_nightly: cost benchmark (N = $COST_BLOCKS) finished in $(( $(date +%s) - start )) s"
fi

if [[ -n $BUSY_BLOCKS ]]; then
  start=$(date +%s)
  rm -rf "$OUT/device_busy"
  # the simulated device: C0 = 2 ms, C1 in {0.05, 0.2, 1.0} ms per window, on this host's CPUs
  "$PY" "$REPO/benchmarks/bench_device_busy.py" --commands run,record,nightly --blocks "$BUSY_BLOCKS" \
    --shapes "$SHAPES" --repeats "$BUSY_REPEATS" --workdir "$OUT/device_busy/simulated" \
    --json "$OUT/device_busy_simulated.json" | tee "$OUT/device_busy_simulated.txt" \
    || echo "gpu_nightly: the simulated-device busy benchmark failed (informative; the verdict stands)"
  rm -rf "$OUT/device_busy/simulated"
  # the real device: MODEL on DEVICE, each call timed between two CUDA events (wall on a CPU)
  "$PY" "$REPO/benchmarks/bench_device_busy.py" --model "lanes.device_timeline:wrap?inner='$MODEL'" \
    --device "$DEVICE" --commands run,record,nightly --blocks "$BUSY_BLOCKS" --shapes "$SHAPES" \
    --repeats "$BUSY_REPEATS" --workdir "$OUT/device_busy/device" --json "$OUT/device_busy_device.json" \
    | tee "$OUT/device_busy_device.txt" \
    || echo "gpu_nightly: the real-device busy benchmark failed (informative; the verdict stands)"
  rm -rf "$OUT/device_busy"
  echo "gpu_nightly: busy benchmark (N = $BUSY_BLOCKS) finished in $(( $(date +%s) - start )) s"
fi

if [[ $DEVICE == cuda* ]]; then
  # does the copy of request n+1 overlap the compute of request n (lanes/staging.py)? from a profiler trace
  "$PY" "$REPO/benchmarks/gpu_copy_overlap.py" --device "$DEVICE" --model "$MODEL" \
    --json "$OUT/copy_overlap.json" | tee "$OUT/copy_overlap.txt" \
    || echo "gpu_nightly: the copy-overlap check failed (informative; the verdict stands)"
fi

"$PY" "$REPO/benchmarks/gpu_summary.py" "$OUT"
exit "$status"
