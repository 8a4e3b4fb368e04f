#!/usr/bin/env bash
# What issue 49 asks `xpubench fleet` to show on Slurm, by hand (as root, with Debian's slurm-wlm and munge: the
# test setup installs them): a one-node Slurm on 127.0.0.1 (tests/slurm_cluster.py), a fleet of two machines on
# one partition running matmul and mnist_cnn, Ctrl-C (SIGINT) once a first result arrived, squeue, --resume to
# the end, squeue again, then `site` and `compare` reading the folder. tests/test_fleet_slurm.py checks the same.
#   bash scripts/fleet_slurm_demo.sh [WORK]      WORK: a folder for it all (default: a new temporary one)
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-$(mktemp -d /tmp/xpubench-fleet-demo-XXXX)}
mkdir -p "$WORK"
PY=${PYTHON:-python3}
$PY tests/slurm_cluster.py "$WORK/slurm" > "$WORK/cluster.out" 2>&1 &
CLUSTER=$!
trap 'kill -TERM $CLUSTER 2>/dev/null; wait $CLUSTER 2>/dev/null || true' EXIT
until grep -q SLURM_CONF "$WORK/cluster.out"; do kill -0 $CLUSTER || { cat "$WORK/cluster.out"; exit 1; }; sleep 0.5; done
export SLURM_CONF=$WORK/slurm/slurm.conf
cat > "$WORK/fleet.toml" <<'TOML'
[run]
workload = ["matmul", "mnist_cnn"]
backend = ["torch"]
precision = ["fp32"]
size = [64]
quick = true
epochs = 1
train_samples = 512
processes = 2

[[machine]]
name = "node-a"
slurm = { partition = "debug", time = "00:10:00" }

[[machine]]
name = "node-b"
slurm = { partition = "debug", time = "00:10:00" }
TOML
set -x
sinfo
$PY -m xpubench fleet "$WORK/fleet.toml" -o "$WORK/out" --dry-run
$PY -m xpubench fleet "$WORK/fleet.toml" -o "$WORK/out" --no-progress &
FLEET=$!
{ set +x; } 2>/dev/null
until [ -s "$WORK/out/node-a.jsonl" ] || [ -s "$WORK/out/node-b.jsonl" ]; do sleep 0.5; done
set -x
kill -INT $FLEET
wait $FLEET || echo "fleet exit code $?"
squeue
wc -l "$WORK"/out/*.jsonl
$PY -m xpubench fleet --resume "$WORK/out" --no-progress
squeue
wc -l "$WORK"/out/*.jsonl
$PY -m xpubench site "$WORK/out" -o "$WORK/site"
$PY -m xpubench compare "$WORK/out"
