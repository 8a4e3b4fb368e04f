#!/usr/bin/env bash
# The first hour on a GPU or TPU: one command that checks and measures everything that matters there,
# in steps of under 10 minutes (45 minutes in all), into results/reference/<device>/ (ready to commit).
#   bash scripts/accelerator_check.sh                      # on the machine to check
#   bash scripts/accelerator_check.sh --out DIR            # another results root (or XPUBENCH_CHECK_OUT=DIR)
#   bash scripts/accelerator_check.sh --dry-run [--env-file FILE]   # the commands only (XPUBENCH_CHECK_DRY=1)
# On a machine without an accelerator the steps that need one are skipped, each saying so, and it ends 0.
# The steps and their limits: scripts/accelerator_check.py; what to do with the folder: docs/accelerators.md.
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-python3}" scripts/accelerator_check.py "$@"
