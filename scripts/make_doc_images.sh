#!/usr/bin/env bash
# Regenerates the two report charts shown in README.md and docs/reports.md from fresh runs:
#   docs/img/batch_size.png        (MNIST CNN throughput against batch size, PyTorch and JAX)
#   docs/img/matmul_cold_warm.png  (matmul cold against warm FLOP/s per backend, dtype and N)
# with the commands the README gives under "Reports", then `xpubench report --format md`, whose
# report_files/ folder holds every chart as a PNG.
#
#   bash scripts/make_doc_images.sh            # the real runs: many minutes of CPU on 2 cores
#   bash scripts/make_doc_images.sh --quick    # tiny runs (about a minute) that check the script;
#                                              # its PNGs go to the work folder, docs/img is untouched
#   bash scripts/make_doc_images.sh --screenshots FILE.jsonl [...]
#       the report's sections as headless Chromium draws them, one PNG each, cropped to the section:
#       docs/img/report-<section>.png (scripts/report_screenshots.py; needs chromium). docs/reports.md
#       shows them; they were made from tests/data/runs/report-zen3.jsonl (a real run, see its README).
# Environment: PYTHON (default python3), MNIST_DIR (default ../shared/datasets/mnist, from the repo
# root; the real MNIST files are required except with --quick, which falls back to synthetic data).
# The results files, the report and its PNGs stay in a work folder (printed at the end).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
quick=0
case "${1:-}" in
  "") ;;
  --quick) quick=1 ;;
  --screenshots)
    shift
    [ $# -ge 1 ] || { echo "make_doc_images.sh: --screenshots needs results files" >&2; exit 2; }
    exec "$PY" scripts/report_screenshots.py "$@" --out docs/img ;;
  -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "make_doc_images.sh: unknown argument '$1' (use --quick, --screenshots FILE... or nothing)" >&2
     exit 2 ;;
esac
[ $# -le 1 ] || { echo "make_doc_images.sh: one argument at most" >&2; exit 2; }

MNIST_DIR=${MNIST_DIR:-../shared/datasets/mnist}
xpubench() { "$PY" -m xpubench "$@"; }

if [ -e "$MNIST_DIR/t10k-images-idx3-ubyte.gz" ] || [ -e "$MNIST_DIR/t10k-images-idx3-ubyte" ]; then
  data=(--data real --data-dir "$MNIST_DIR")
elif [ "$quick" = 1 ]; then
  data=()
  echo "make_doc_images.sh: no MNIST in $MNIST_DIR: --quick uses synthetic data" >&2
else
  echo "make_doc_images.sh: no MNIST in $MNIST_DIR (set MNIST_DIR to the folder of the IDX files)" >&2
  exit 2
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/xpubench-doc-images-XXXXXX")
echo "work folder: $work"

if [ "$quick" = 1 ]; then
  batch=(--batch-size 32,64 --epochs 2 --steps 2 --train-samples 256 --eval-samples 128)
  matmul=(-p fp32 --size 64,128 --time-budget 0.2)
else
  # the README's commands, unchanged
  batch=(--batch-size 32,64,128,256 --epochs 3 --steps 6 --train-samples 2048 --eval-samples 1024)
  matmul=(-p fp32,bf16 --size 256,512,1024,2048 --time-budget 1)
fi

xpubench run -w mnist_cnn -b torch,jax "${batch[@]}" "${data[@]}" -o "$work/batch_size.jsonl"
xpubench run -w matmul -b numpy,torch,jax "${matmul[@]}" -o "$work/matmul.jsonl"
xpubench report "$work/batch_size.jsonl" "$work/matmul.jsonl" --format md -o "$work/report.md"

for png in batch_size matmul; do
  [ -s "$work/report_files/$png.png" ] || { echo "make_doc_images.sh: the report drew no $png chart" >&2; exit 1; }
done
if [ "$quick" = 1 ]; then
  target=$work
else
  target=docs/img
fi
cp "$work/report_files/batch_size.png" "$target/batch_size.png"
cp "$work/report_files/matmul.png" "$target/matmul_cold_warm.png"
echo "wrote $target/batch_size.png and $target/matmul_cold_warm.png (results and report in $work)"
