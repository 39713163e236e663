#!/usr/bin/env bash
# The GPU nightly as one command sized to a device lease (a bare, offline machine with Python 3.12 and torch
# but no pydantic; one command at most 10 minutes; at most 8 files of 16 MiB back):
#
#     benchmarks/gpu_lease.sh OUT_DIR
#
# From the device tool, in the repository's root, the wheels the image lacks carried (benchmarks/gpu_wheels.sh
# fetches them into .whl/, which git ignores):
#
#     run(command='benchmarks/gpu_lease.sh "$OUT"', carry=[".whl"], timeout_s=480)
#
# It ends LEASE_S (420 s) after its start: the phases stop at LEASE_S - RESERVE_S (400 s), the last 20 s
# write the summary and copy the files. Each phase prints its elapsed seconds and is a row of the summary's
# phase table. Seconds measured on the CPU of the development VM (2 cores shared with other work, load 4-9:
# slow), DEVICE=cpu MODEL=small, and estimated for one H200 (the plan measures the real figures there):
#
#   phase      what                                                        CPU, small model    H200, estimate
#   wheels     pip install --no-index --no-deps --target $SITE .whl/*.whl  0 (no 3.12 here)    3
#              (only under CPython 3.12, the wheels' tag; WHEELS=1|0 forces)
#   import     benchmarks/gpu_import_check.py: every module, every         10-21               8
#              package the code imports, the versions; fails fast (exit 2)
#   device     torch.cuda.is_available, nvidia-smi                        3-5                 4
#   smoke      gpu_nightly.sh with the small model, the release profile:   172-184             25-35
#              8 blocks, k 2,4, 3 arrangements, 2 repeats, bitwise          (cut at 300)        (cut at 60)
#              rescoring; a crash stops the lease (a refused shape does not)
#   calibrate  golden record of CAL_BLOCKS (8) blocks of MODEL with the     35                  12
#              release's numerics: the full model's first run here, its
#              exact-lane time per block and one process's start-up cost
#   plan       benchmarks/gpu_lease_plan.py: BLOCKS (a multiple of 32, at   1-2                 1
#              most 192) and each phase's budget, from those and the time left
#   long       gpu_nightly.sh: MODEL at k 2,4,8,16,32, 3 arrangements,      release 66,         release 110,
#              2 repeats, both profiles (each rescored in bitwise mode),   speed 95, diff 5    speed 110, diff 20,
#              golden diff, copy overlap (CUDA), real-device busy (run,    (8 blocks, k 2);    overlap 25, busy 55
#              nightly, one arrangement), cost (in time left over only)    overlap 114 (32),   (64 blocks at ~60 ms
#                                                                          busy 37, cost 18    a block): ~330
#   summary    gpu_summary.py, the files into OUT_DIR                       6-9                 5
#
# H200, in all: ~390 s (6.5 min). The full model is 0.05 s per segmentation window and 0.85 s per voiceprint
# window on this CPU (~14 s a block in the exact lane); ~50-150 ms a block there (fp32 without TF32). The plan
# turns the measured figure into 96 blocks at 30 ms, 64 at 60 ms, 32 at 100 ms (busy given up first, then the
# overlap, then 16 blocks) and the deadline cuts whatever still overruns: a whole CPU run of this script with
# its defaults (DEVICE=cpu MODEL=small, the plan's 16 blocks at load 9) ended in 407 s, its release nightly cut.
# A first call costs ~1-2 min of machine start + <= 7 min; of a 15-minute lease that leaves ~5 min for one
# rerun after a fix (a fresh machine: ~1-2 min start, then e.g. LEASE_S=180 SMOKE=0 PROFILES=speed ...).
#
# OUT_DIR receives at most 6 files: summary.md, summary.json (every figure, the plan and the phases),
# score_release.json, score_speed.json, report_release.html (if under 15 MiB) and gpu_lease.log (this
# command's whole output). Everything else is written under WORK (default: a new folder under /tmp, removed
# at the end unless WORK was given).
#
# Environment: PYTHON, DEVICE, MODEL (full on CUDA, small on the CPU), BLOCKS (else the plan's), SHAPES
# (2,4,8,16,32), ARRANGEMENTS (3), REPEATS (2), PROFILES (release,speed), LEASE_S (420), RESERVE_S (20),
# SMOKE (1 | 0), SMOKE_S (60; 300 on the CPU), SMOKE_BLOCKS (8), SMOKE_SHAPES (2,4), SMOKE_PROFILES
# (release), CAL_BLOCKS (8), CAL_S (120), WHEELS (auto | 1 | 0), SITE (/tmp/site), WORK; COPY_OVERLAP,
# COPY_BLOCKS, BUSY_BLOCKS, BUSY_REPEATS (1), COST_BLOCKS override the plan's (empty BUSY_BLOCKS or
# COST_BLOCKS: skip).
# Exit status: the release nightly's (0 = every shape promoted, the golden reproduced; 1 = a verdict failed;
# 124 = cut off), or 2 when the imports fail, or the smoke's or the calibration's when they could not run.
set -euo pipefail

OUT=${1:?usage: benchmarks/gpu_lease.sh OUT_DIR}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
if [[ -z ${GPU_LEASE_LOGGED:-} ]]; then  # once more, its whole output into OUT_DIR/gpu_lease.log
  export GPU_LEASE_LOGGED=1 GPU_LEASE_START=${GPU_LEASE_START:-$(date +%s)}
  rm -f "$OUT"/{summary.md,summary.json,score_release.json,score_speed.json,report_release.html}  # an earlier run's
  rc=0
  bash "${BASH_SOURCE[0]}" "$OUT" 2>&1 | tee "$OUT/gpu_lease.log" || rc=$?
  exit "$rc"
fi

PY=${PYTHON:-python3}
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 MPLBACKEND=Agg
START=${GPU_LEASE_START:-$(date +%s)}
LEASE_S=${LEASE_S:-420}
RESERVE_S=${RESERVE_S:-20}
DEADLINE=$(( START + LEASE_S - RESERVE_S ))
KEEP_WORK=0
if [[ -n ${WORK:-} ]]; then KEEP_WORK=1; else WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-lease.XXXXXX"); fi
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
LONG="$WORK/long"
SMOKE_DIR="$WORK/smoke"
rm -rf "$LONG" "$SMOKE_DIR" "$WORK/calib"
mkdir -p "$LONG"
PHASES_TSV="$LONG/phases.tsv"
: >"$PHASES_TSV"
SHAPES=${SHAPES:-2,4,8,16,32}
ARRANGEMENTS=${ARRANGEMENTS:-3}
REPEATS=${REPEATS:-2}
echo "gpu_lease: start $(date -u +%FT%TZ), ends by $LEASE_S s (the phases by $(( LEASE_S - RESERVE_S )) s)," \
  "work in $WORK, files to $OUT"

PHASE_START=$START
begin() { PHASE_START=$(date +%s); echo "gpu_lease: phase $1 ($(( PHASE_START - START )) s in)"; }
# end NAME RC [BUDGET]: its elapsed seconds, printed and added to the phase table
end() {
  local took=$(( $(date +%s) - PHASE_START ))
  echo "gpu_lease: phase $1 finished in $took s with exit status $2"
  printf '%s\t%s\t%s\t%s\t\n' "$1" "$took" "${3:--}" "$2" >>"$PHASES_TSV"
}

# collect: the summary (with the lease's phases) and at most 6 files into OUT_DIR
collect() {
  local start smoke=()
  start=$(date +%s)
  if [[ -d $SMOKE_DIR ]]; then smoke=(--smoke "$SMOKE_DIR"); fi
  if ! "$PY" "$REPO/benchmarks/gpu_summary.py" "$LONG" "${smoke[@]}" >/dev/null; then
    echo "gpu_lease: the summary failed: summary.md is the phase table alone"
    { echo "# GPU nightly summary (gpu_summary.py failed: see gpu_lease.log)"; echo; echo "## phases"; echo
      echo "| phase | seconds | budget s | exit | part of |"; echo "|---|---|---|---|---|"
      tr '\t' '|' <"$PHASES_TSV" | sed 's/^/| /; s/$/ |/'; } >"$LONG/summary.md"
  fi
  echo "gpu_lease: phase summary finished in $(( $(date +%s) - start )) s"
  for f in summary.md summary.json; do
    if [[ -f $LONG/$f ]]; then cp "$LONG/$f" "$OUT/$f"; fi
  done
  for profile in release speed; do
    local score="$LONG/$profile/nightly/score.json"
    if [[ -f $score ]]; then cp "$score" "$OUT/score_$profile.json"; fi
  done
  local report="$LONG/release/nightly/report/report.html"
  if [[ -f $report ]] && (( $(stat -c %s "$report") < 15 * 1024 * 1024 )); then
    cp "$report" "$OUT/report_release.html"
  fi
  echo "gpu_lease: $(( $(date +%s) - START )) s in all; files in $OUT: $(cd "$OUT" && ls | tr '\n' ' ')"
  if [[ -f $OUT/summary.md ]]; then sed -n '/^## phases/,$p' "$OUT/summary.md"; fi
  if (( ! KEEP_WORK )); then rm -rf "$WORK"; fi
}

# --- wheels: the packages the image lacks (benchmarks/gpu_wheels.txt), from the carried .whl/
begin wheels
WHEELS=${WHEELS:-auto}
whl=("$REPO"/.whl/*.whl)
rc=0
if [[ $WHEELS != 0 && -f ${whl[0]} ]]; then
  pyver=$("$PY" -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')
  if [[ $WHEELS == 1 || $pyver == 312 ]]; then
    SITE=${SITE:-/tmp/site}
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "${whl[@]}" \
      || rc=$?
    export PYTHONPATH="$REPO:$SITE${PYTHONPATH#"$REPO"}"
    echo "gpu_lease: ${#whl[@]} wheels into $SITE (exit $rc): $(cd "$REPO/.whl" && ls | tr '\n' ' ')"
  else
    echo "gpu_lease: wheels not installed: they are for CPython 3.12, this is $pyver (WHEELS=1 forces)"
  fi
else
  echo "gpu_lease: no wheels installed (.whl/ empty or WHEELS=0)"
fi
end wheels "$rc"

# --- import: fail fast when a module or a package cannot be imported
begin import
rc=0
"$PY" "$REPO/benchmarks/gpu_import_check.py" || rc=$?
end import "$rc"
if (( rc != 0 )); then
  echo "gpu_lease: the imports fail: nothing else is run (carry the missing wheels: benchmarks/gpu_wheels.txt)"
  collect
  exit 2
fi

# --- device: which one, and what it is
begin device
DEVICE=${DEVICE:-$("$PY" -c 'import torch; print("cuda:0" if torch.cuda.is_available() else "cpu")')}
if [[ $DEVICE == cuda* ]]; then
  MODEL=${MODEL:-full}
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>/dev/null || true
else
  MODEL=${MODEL:-small}
fi
echo "gpu_lease: device $DEVICE, model $MODEL"
end device 0

# --- smoke: the whole nightly flow with the small model, in seconds, before the long part
if [[ ${SMOKE:-1} == 1 ]]; then
  begin smoke
  if [[ $DEVICE == cuda* ]]; then SMOKE_S=${SMOKE_S:-60}; else SMOKE_S=${SMOKE_S:-300}; fi
  smoke_end=$(( $(date +%s) + SMOKE_S ))
  if (( smoke_end > DEADLINE )); then smoke_end=$DEADLINE; fi
  rc=0
  DEVICE=$DEVICE MODEL=small BLOCKS=${SMOKE_BLOCKS:-8} SHAPES=${SMOKE_SHAPES:-2,4} ARRANGEMENTS=3 REPEATS=2 \
    PROFILES=${SMOKE_PROFILES:-release} COPY_OVERLAP=0 BUSY_BLOCKS='' COST_BLOCKS='' SUMMARY=0 \
    PHASE_PARENT=smoke PHASES_TSV="$PHASES_TSV" DEADLINE=$smoke_end T_RELEASE='' T_SPEED='' T_DIFF='' \
    timeout --kill-after=10 $(( smoke_end - $(date +%s) + 20 )) bash "$REPO/benchmarks/gpu_nightly.sh" "$SMOKE_DIR" \
    || rc=$?
  end smoke "$rc" "$SMOKE_S"
  if (( rc == 124 )); then
    echo "gpu_lease: the smoke ran past its $SMOKE_S s (a slow host, not a crash): the plan sizes the rest to the" \
      "time left"
  elif (( rc > 1 )); then
    echo "gpu_lease: the smoke could not run (exit $rc): the long part is not started"
    collect
    exit "$rc"
  fi
fi

# --- calibrate: MODEL's first run through the harness here, and its exact-lane time per block
begin calibrate
CAL_BLOCKS=${CAL_BLOCKS:-8}
mkdir -p "$WORK/calib"
cat >"$WORK/calib/harness.toml" <<TOML
[release]
name = "gpu-lease-calibration"
device = "$DEVICE"
[model]
spec = "$MODEL"
[corpus]
blocks = $CAL_BLOCKS
[numerics]
cudnn_benchmark = false
cudnn_deterministic = true
deterministic_algorithms = true
allow_tf32 = false
matmul_precision = "highest"
TOML
CAL_S=${CAL_S:-120}
if (( PHASE_START + CAL_S > DEADLINE )); then CAL_S=$(( DEADLINE - PHASE_START )); fi
rc=0
timeout --kill-after=10 "$CAL_S" "$PY" -m harness.cli golden record --config "$WORK/calib/harness.toml" \
  --goldens "$WORK/calib/goldens" --no-progress || rc=$?
CAL_WALL=$(( $(date +%s) - PHASE_START ))
end calibrate "$rc" "$CAL_S"
if (( rc != 0 )); then
  echo "gpu_lease: MODEL $MODEL could not record a golden here (exit $rc): the long part is not started"
  collect
  exit "$rc"
fi

# --- plan: BLOCKS and the budgets from the measured time and the time left
begin plan
rc=0
plan=$("$PY" "$REPO/benchmarks/gpu_lease_plan.py" "$WORK/calib/goldens/gpu-lease-calibration" \
  --record-wall "$CAL_WALL" --left $(( DEADLINE - $(date +%s) )) --shapes "$SHAPES" --arrangements "$ARRANGEMENTS" \
  --repeats "$REPEATS" ${BLOCKS:+--blocks "$BLOCKS"} --json "$LONG/plan.json") || rc=$?
end plan "$rc"
if (( rc != 0 )); then collect; exit "$rc"; fi
echo "$plan"
eval "$plan"

# --- long: the nightly on MODEL, both profiles, then its informative phases
begin long
if [[ $DEVICE == cuda* ]]; then COPY_OVERLAP=${COPY_OVERLAP:-$COPY_OVERLAP_PLAN}; fi
COPY_OVERLAP=${COPY_OVERLAP:-0}  # on the CPU there is no copy to overlap
rc=0
DEVICE=$DEVICE MODEL=$MODEL BLOCKS=$BLOCKS SHAPES=$SHAPES ARRANGEMENTS=$ARRANGEMENTS REPEATS=$REPEATS \
  PROFILES=${PROFILES:-release,speed} DEADLINE=$DEADLINE T_RELEASE=$T_RELEASE T_SPEED=$T_SPEED T_DIFF=$T_DIFF \
  T_OVERLAP=$T_OVERLAP T_BUSY=$T_BUSY T_COST=$T_COST COPY_OVERLAP=$COPY_OVERLAP \
  COPY_BLOCKS=${COPY_BLOCKS:-$COPY_BLOCKS_PLAN} BUSY_BLOCKS=${BUSY_BLOCKS-$BUSY_BLOCKS_PLAN} BUSY_COMMANDS=run,nightly \
  BUSY_REPEATS=${BUSY_REPEATS:-1} BUSY_SIMULATED=0 BUSY_EXTRA='--arrangements 1' \
  COST_BLOCKS=${COST_BLOCKS-$COST_BLOCKS_PLAN} PHASE_PARENT=long SUMMARY=0 \
  bash "$REPO/benchmarks/gpu_nightly.sh" "$LONG" || rc=$?
end long "$rc" $(( DEADLINE - PHASE_START ))

collect
exit "$rc"
