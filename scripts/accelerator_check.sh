#!/usr/bin/env bash
# The accelerator check: what a short job on a GPU, TPU or Apple GPU should measure, within one budget,
# into results/reference/<device>/ (summary.md / summary.json rewritten after every step).
#   bash scripts/accelerator_check.sh --minutes 8       # default: until SLURM_JOB_END_TIME, else 8 minutes
#   bash scripts/accelerator_check.sh --out DIR         # another results root (or XPUBENCH_CHECK_OUT=DIR)
#   bash scripts/accelerator_check.sh --dry-run [--env-file FILE]   # the plan only (XPUBENCH_CHECK_DRY=1)
# Needs only this checkout and torch and/or jax: no pip, no network, no pytest plugins.
# The steps, budget and summary: scripts/accelerator_check.py; what to send back: docs/accelerators.md.
set -euo pipefail
export XPUBENCH_CHECK_T0="${XPUBENCH_CHECK_T0:-$(date +%s.%N)}"   # the budget counts from here
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
exec "${PYTHON:-python3}" scripts/accelerator_check.py "$@"
