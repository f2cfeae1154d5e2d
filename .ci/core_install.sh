#!/usr/bin/env bash
# The install users run, not the one CI has: `[test]` installs every extra, so a core command
# that needs one (doctor once needed the postgres extra) passes the suite and fails for
# everyone with `pip install lossless`. This builds a fresh venv with the core install only
# and runs the README's first command there, then doctor on the store the demo wrote, and a
# few other core commands; each must exit 0.
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
python3 -m venv "$WORK/venv"
"$WORK/venv/bin/python" -m pip install -q --disable-pip-version-check .
BIN="$WORK/venv/bin"
if "$BIN/python" -c 'import psycopg' 2>/dev/null || "$BIN/python" -c 'import onnxruntime' 2>/dev/null; then
  echo "core_install: the core venv has an extra installed" >&2
  exit 1
fi
export LOSSLESS_HOME="$WORK/home"
cd "$WORK"  # away from the source tree: the venv's installed package is what runs
"$BIN/lossless" demo --db "$WORK/demo.db" >"$WORK/demo.out"
tail -n 3 "$WORK/demo.out"
"$BIN/lossless" --db "$WORK/demo.db" doctor
"$BIN/lossless" --db "$WORK/demo.db" stats >/dev/null
"$BIN/lossless" --db "$WORK/demo.db" ls >/dev/null
"$BIN/lossless" --db "$WORK/demo.db" search --all "deploy" >/dev/null
echo "core_install: demo, doctor, stats, ls and search exit 0 on the core install"
