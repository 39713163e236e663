#!/usr/bin/env bash
# The nightly on a GPU, from the working tree, in one command:
#
#     benchmarks/gpu_nightly.sh OUT_DIR
#
# (On a leased device machine, run benchmarks/gpu_lease.sh instead: it installs the carried wheels, checks
# the imports, runs a small-model smoke of this script, sizes BLOCKS and the phases' budgets to the lease,
# then runs this script and brings back at most 8 files.)
#
# Records a golden on the device and runs the nightly (candidate shapes up to k = 32 on a GPU) twice:
# with the numeric settings a release uses (cudnn.benchmark off, deterministic on, TF32 off) and with a
# speed-minded deployment's (cudnn.benchmark on, TF32 on). Each profile's run is scored a second time in
# bitwise mode (OUT_DIR/PROFILE/score_bitwise.json), and `harness golden diff` judges the speed profile's
# golden against the release's (OUT_DIR/golden_diff.json). Writes both reports, both JUnit files and
# OUT_DIR/summary.md (+ summary.json): per profile, OP and shape: bitwise?, max abs, max ULP, flips, rows
# matched, verdict in tolerance and in bitwise mode, arrangement / duplicate / repeat evidence, blocks/s,
# speedup with its interval, peak memory; the golden's reproduction, the golden diff, the numerics in force.
#
# Runs without installing anything (PYTHONPATH=<repo>): it needs torch, numpy, pyarrow, typer, pydantic, scipy,
# rich, numba, hypothesis and jinja2 (the GPU image lacks pydantic: benchmarks/gpu_wheels.txt). Without a GPU
# it runs the same job on the CPU with the small model (that is how CI tests this script, through
# benchmarks/gpu_lease.sh).
#
# Then (phases in this order, each informative: the verdict stands whatever they do):
# - overlap: on CUDA (or COPY_OVERLAP=1), whether the copy of request n+1 overlaps the compute of request n
#   (benchmarks/gpu_copy_overlap.py: staged vs unstaged, from a torch.profiler trace; COPY_BLOCKS blocks):
#   OUT_DIR/copy_overlap.{txt,json}.
# - busy: whether the harness keeps the device busy (benchmarks/bench_device_busy.py, BUSY_BLOCKS blocks,
#   BUSY_COMMANDS; BUSY_EXTRA: more options of run and nightly, e.g. '--arrangements 1'): with the simulated
#   device (BUSY_SIMULATED=1: the null network that sleeps C0 + C1 x windows per call, this host's CPUs
#   against an assumed device) and with the real device (lanes/running/device_timeline.py wraps MODEL and times each
#   call with CUDA events): busy fraction, command share, harness share, peak RSS in
#   OUT_DIR/device_busy_{simulated,device}.{txt,json}.
# - cost: the harness's own cost (benchmarks/bench_harness_cost.py: the null network at full geometry,
#   record/run/score/promote/report at COST_BLOCKS blocks) against the network time per window this machine
#   just measured (the release nightly's largest shape): OUT_DIR/harness_cost.{txt,json}.
#
# Environment overrides: DEVICE (cuda:0 | cpu), MODEL (full | small | spec), BLOCKS, SHAPES (e.g.
# 2,4,8,16,32), ARRANGEMENTS (per candidate shape, [evidence] arrangements: 3), REPEATS ([evidence] repeats:
# 2 on a GPU, 1 on the CPU), PROFILES (release,speed), COPY_OVERLAP (1 | 0; default: on CUDA only),
# COPY_BLOCKS (32), BUSY_BLOCKS (e.g. 256,1024; empty: skip, the CPU default), BUSY_COMMANDS
# (run,record,nightly), BUSY_REPEATS (3), BUSY_SIMULATED (1 | 0), COST_BLOCKS (e.g. 256,1024; empty: skip,
# the CPU default), SUMMARY (1 | 0: no summary, its caller writes one), PYTHON.
# Time: every phase prints its elapsed seconds and adds a line to OUT_DIR/phases.tsv (the summary's phase
# table; PHASES_TSV puts it elsewhere, PHASE_PARENT names the caller's phase these are part of). DEADLINE
# (epoch seconds) and T_RELEASE, T_SPEED, T_DIFF, T_OVERLAP, T_BUSY, T_COST (seconds per phase) cut a phase's
# commands off (TERM, then KILL 10 s later) when its budget or the deadline runs out; unset, nothing is cut.
# A phase with under 5 s left is skipped.
# Exit status: the release profile's nightly status (0 = every shape promoted and the golden reproduced;
# 1 = a verdict failed; 2 or 3 = it could not run; 124 = cut off by its budget); the speed profile and the
# benchmarks are informative. A profile that cannot run stops nothing after it: what can still be measured is.
set -euo pipefail

OUT=${1:?usage: benchmarks/gpu_nightly.sh OUT_DIR}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-python3}
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 MPLBACKEND=Agg
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
PHASES_TSV=${PHASES_TSV:-$OUT/phases.tsv}

DEVICE=${DEVICE:-$("$PY" -c 'import torch; print("cuda:0" if torch.cuda.is_available() else "cpu")')}
if [[ $DEVICE == cuda* ]]; then
  MODEL=${MODEL:-full}; BLOCKS=${BLOCKS:-48}; SHAPES=${SHAPES:-2,4,8,16,32}; COST_BLOCKS=${COST_BLOCKS-256,1024}
  BUSY_BLOCKS=${BUSY_BLOCKS-256,1024}; REPEATS=${REPEATS:-2}; COPY_OVERLAP=${COPY_OVERLAP:-1}
else
  MODEL=${MODEL:-small}; BLOCKS=${BLOCKS:-16}; SHAPES=${SHAPES:-2,4}; COST_BLOCKS=${COST_BLOCKS-}
  BUSY_BLOCKS=${BUSY_BLOCKS-}; REPEATS=${REPEATS:-1}; COPY_OVERLAP=${COPY_OVERLAP:-0}
fi
ARRANGEMENTS=${ARRANGEMENTS:-3}
PROFILES=${PROFILES:-release,speed}
COPY_BLOCKS=${COPY_BLOCKS:-32}
BUSY_COMMANDS=${BUSY_COMMANDS:-run,record,nightly}
BUSY_REPEATS=${BUSY_REPEATS:-3}
BUSY_SIMULATED=${BUSY_SIMULATED:-1}
BUSY_EXTRA=${BUSY_EXTRA:-}
echo "gpu_nightly: device $DEVICE, model $MODEL, $BLOCKS blocks, shapes $SHAPES, arrangements $ARRANGEMENTS," \
  "repeats $REPEATS, profiles $PROFILES, output $OUT"
"$PY" - <<PYEOF
import torch, numpy, sys
print(f"python {sys.version.split()[0]}, torch {torch.__version__} (CUDA {torch.version.cuda}), numpy {numpy.__version__}")
if torch.cuda.is_available():
    print("device:", torch.cuda.get_device_name(0))
PYEOF

# phase_end BUDGET: the epoch second a phase starting now must end by (BUDGET from now, cut to DEADLINE);
# empty when neither is set.
phase_end() {
  local budget=${1:-} end=""
  if [[ -n $budget ]]; then end=$(( $(date +%s) + budget )); fi
  if [[ -n ${DEADLINE:-} ]] && { [[ -z $end ]] || (( DEADLINE < end )); }; then end=$DEADLINE; fi
  echo "$end"
}

# timed END CMD...: CMD, cut off at the epoch second END (TERM, then KILL 10 s later; exit 124); END empty: uncut.
timed() {
  local end=$1; shift
  if [[ -z $end ]]; then "$@"; return; fi
  local left=$(( end - $(date +%s) ))
  if (( left < 1 )); then echo "gpu_nightly: no time left for: ${*:1:4} ..."; return 124; fi
  local rc=0
  timeout --kill-after=10 "$left" "$@" || rc=$?
  if (( rc == 137 )); then rc=124; fi  # killed after the TERM went unanswered: cut off all the same
  return "$rc"
}

# starting NAME BUDGET: 0 when the phase has at least 5 s (else it is logged as skipped); sets PHASE_START/END.
starting() {
  PHASE_START=$(date +%s); PHASE_END=$(phase_end "${2:-}")
  if [[ -n $PHASE_END ]] && (( PHASE_END - PHASE_START < 5 )); then
    echo "gpu_nightly: phase $1 skipped: $(( PHASE_END - PHASE_START )) s left of its budget or the deadline"
    printf '%s\t%s\t%s\t%s\t%s\n' "$1" 0 "$(( PHASE_END - PHASE_START ))" skipped "${PHASE_PARENT:-}" >>"$PHASES_TSV"
    return 1
  fi
}

# finished NAME RC [NOTE]: prints the phase's elapsed time and adds it to OUT_DIR/phases.tsv.
finished() {
  local took=$(( $(date +%s) - PHASE_START )) budget="-"
  if [[ -n $PHASE_END ]]; then budget=$(( PHASE_END - PHASE_START )); fi
  echo "gpu_nightly: phase $1 finished in $took s (budget $budget s) with exit status $2${3:+ ($3)}"
  printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$took" "$budget" "$2" "${PHASE_PARENT:-}" >>"$PHASES_TSV"
}

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
repeats = $REPEATS
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
for profile in ${PROFILES//,/ }; do
  budget_var="T_${profile^^}"
  starting "$profile" "${!budget_var:-}" || { [[ $profile == release ]] && status=124; continue; }
  cfg="$OUT/$profile/harness.toml"
  golden="$OUT/$profile/goldens/gpu-nightly-$profile"
  rm -rf "$OUT/$profile/goldens" "$OUT/$profile/nightly" "$OUT/$profile/score_bitwise.json"
  rc=0
  timed "$PHASE_END" "$PY" -m harness.cli golden record --config "$cfg" --goldens "$OUT/$profile/goldens" \
    --no-progress || rc=$?
  if (( rc == 0 )); then
    timed "$PHASE_END" "$PY" -m harness.cli nightly --config "$cfg" --golden "$golden" \
      --out "$OUT/$profile/nightly" --no-progress || rc=$?
  fi
  runs=("$OUT/$profile"/nightly/runs/*/)
  if [[ -f $OUT/$profile/nightly/score.json && -d ${runs[0]} ]]; then
    # the same run judged in bitwise mode: which shapes give the exact lane's bits (exit 1: some do not)
    brc=0
    timed "$(phase_end 120)" "$PY" -m harness.cli score --config "$cfg" --golden "$golden" --run "${runs[0]%/}" \
      --out "$OUT/$profile/score_bitwise.json" --tolerance bitwise >/dev/null || brc=$?
    if (( brc > 1 )); then echo "gpu_nightly: the bitwise scoring of $profile failed (exit $brc)"; fi
  fi
  finished "$profile" "$rc"
  if [[ $profile == release ]]; then status=$rc; fi
  if (( rc > 1 && rc != 124 )); then
    echo "gpu_nightly: profile $profile could not run (exit $rc); the phases after it run all the same"
  fi
done

goldens=("$OUT/release/goldens/gpu-nightly-release" "$OUT/speed/goldens/gpu-nightly-speed")
if [[ -f ${goldens[0]}/manifest.json && -f ${goldens[1]}/manifest.json ]] && starting diff "${T_DIFF:-}"; then
  # the numeric settings' own effect: the speed profile's golden judged against the release's (exit 1: beyond tolerance)
  rc=0
  timed "$PHASE_END" "$PY" -m harness.cli golden diff "${goldens[@]}" --config "$OUT/release/harness.toml" \
    --out "$OUT/golden_diff.json" || rc=$?
  finished diff "$rc"
fi

if [[ $COPY_OVERLAP == 1 ]] && starting overlap "${T_OVERLAP:-}"; then
  # does the copy of request n+1 overlap the compute of request n (lanes/running/staging.py)? from a profiler trace
  rc=0
  timed "$PHASE_END" "$PY" "$REPO/benchmarks/gpu_copy_overlap.py" --device "$DEVICE" --model "$MODEL" \
    --blocks "$COPY_BLOCKS" --json "$OUT/copy_overlap.json" | tee "$OUT/copy_overlap.txt" || rc=$?
  finished overlap "$rc" "informative"
fi

if [[ -n $BUSY_BLOCKS ]] && starting busy "${T_BUSY:-}"; then
  rm -rf "$OUT/device_busy"
  rc=0
  if [[ $BUSY_SIMULATED == 1 ]]; then
    # the simulated device: C0 = 2 ms, C1 in {0.05, 0.2, 1.0} ms per window, on this host's CPUs, two calls in flight
    timed "$PHASE_END" "$PY" "$REPO/benchmarks/bench_device_busy.py" --commands "$BUSY_COMMANDS" --flight two \
      --blocks "$BUSY_BLOCKS" --shapes "$SHAPES" --extra "$BUSY_EXTRA" --repeats "$BUSY_REPEATS" \
      --workdir "$OUT/device_busy/simulated" \
      --json "$OUT/device_busy_simulated.json" | tee "$OUT/device_busy_simulated.txt" || rc=$?
    rm -rf "$OUT/device_busy/simulated"
  fi
  # the real device: MODEL on DEVICE, each call timed between two CUDA events (wall on a CPU)
  timed "$PHASE_END" "$PY" "$REPO/benchmarks/bench_device_busy.py" --model "lanes.running.device_timeline:wrap?inner='$MODEL'" \
    --device "$DEVICE" --commands "$BUSY_COMMANDS" --blocks "$BUSY_BLOCKS" --shapes "$SHAPES" --extra "$BUSY_EXTRA" \
    --repeats "$BUSY_REPEATS" --workdir "$OUT/device_busy/device" --json "$OUT/device_busy_device.json" \
    | tee "$OUT/device_busy_device.txt" || rc=$?
  rm -rf "$OUT/device_busy"
  finished busy "$rc" "informative; N = $BUSY_BLOCKS"
fi

runs=("$OUT"/release/nightly/runs/*/)
if [[ -n $COST_BLOCKS && -d ${runs[0]} ]] && starting cost "${T_COST:-}"; then
  rm -rf "$OUT/harness_cost"
  rc=0
  timed "$PHASE_END" "$PY" "$REPO/benchmarks/bench_harness_cost.py" --blocks "$COST_BLOCKS" \
    --network-from "${runs[0]%/}" --workdir "$OUT/harness_cost" --json "$OUT/harness_cost.json" \
    | tee "$OUT/harness_cost.txt" || rc=$?
  rm -rf "$OUT/harness_cost"
  finished cost "$rc" "informative; N = $COST_BLOCKS"
fi

if [[ ${SUMMARY:-1} == 1 ]]; then "$PY" "$REPO/benchmarks/gpu_summary.py" "$OUT"; fi
exit "$status"
