#!/usr/bin/env bash
# (Re)download the wheels the GPU machine lacks (benchmarks/gpu_wheels.txt) into REPO/.whl, for
# CPython 3.12 on manylinux x86_64, whatever this machine's Python or processor:
#
#     benchmarks/gpu_wheels.sh
#
# .whl/ is git-ignored; a `run` call carries it (carry: [".whl"]) and benchmarks/gpu_lease.sh
# installs it there with pip --no-index --no-deps --target before anything imports. Wheels in .whl/
# that the list does not name are removed (two versions of one package stop the whole install).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-python3}
mapfile -t pins < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$REPO/benchmarks/gpu_wheels.txt" | grep -v '^$')
mkdir -p "$REPO/.whl"
rm -f "$REPO"/.whl/*.whl
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$REPO/.whl" "${pins[@]}"
count=$(find "$REPO/.whl" -type f -name '*.whl' | wc -l)
if (( count != ${#pins[@]} )); then
  echo "gpu_wheels: ${#pins[@]} pins but $count wheels in .whl" >&2; exit 1
fi
echo "gpu_wheels: $count wheels, $(du -sh "$REPO/.whl" | cut -f1) in $REPO/.whl:"
ls -1 "$REPO/.whl"
