#!/usr/bin/env bash
# Installs xpubench with PyTorch and JAX into the current Python (3.10+).
#   bash scripts/setup.sh        -> what `xpubench run` needs
#   bash scripts/setup.sh test   -> plus pytest (with pytest-xdist: the suite in 2 processes), Debian's chromium
#                                   (the report screenshot test), slurm-wlm, munge and openssh-server (the fleet's
#                                   tests), a llama.cpp build (scripts/build_llamacpp.sh: the llama.cpp
#                                   runtime's tests) and the OpenVINO GenAI and MLX-LM engines
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# torch first, pinned: a bare "torch" requirement would pull a multi-GB CUDA build on a CPU machine.
# On a GPU machine install the CUDA wheel of your choice first (and "jax[cuda12]"); this then keeps it.
$PY -m pip install -q --disable-pip-version-check "torch==2.13.0" 2>&1 | grep -v "as the 'root' user" || true
if [ "${1:-}" = "test" ]; then
  # the engines' extras too (docs/engines.md): OpenVINO GenAI + NNCF and MLX-LM on mlx[cpu], tests/test_engines.py
  $PY -m pip install -q --disable-pip-version-check -e ".[all,test,openvino,mlx]" 2>&1 | grep -v "as the 'root' user" || true
  # llama.cpp for -b llamacpp and tests/test_llamacpp*.py: compiled once (21 CPU-minutes: ~11 min on 2 idle cores), then cached;
  # XPUBENCH_LLAMACPP_ADOPT=DIR copies a finished build of the same source instead. A failed build only skips them.
  bash scripts/build_llamacpp.sh ${XPUBENCH_LLAMACPP_ADOPT:+--adopt "$XPUBENCH_LLAMACPP_ADOPT"} \
    || echo "setup: llama.cpp not built: the llama.cpp tests will be skipped with the reason" >&2
  # Debian's packages the tests use: chromium (the report screenshot test), slurm-wlm and munge (the one-node
  # Slurm of tests/slurm_cluster.py: the fleet's and srun's tests), openssh-server (tests/test_fleet_ssh.py)
  wanted=""
  command -v chromium >/dev/null 2>&1 || wanted="$wanted chromium"
  { [ -x /usr/sbin/slurmctld ] && [ -x /usr/sbin/slurmd ] && command -v sbatch >/dev/null 2>&1; } \
    || wanted="$wanted slurm-wlm"
  [ -x /usr/sbin/munged ] || wanted="$wanted munge"
  { [ -x /usr/sbin/sshd ] && command -v ssh >/dev/null 2>&1; } || wanted="$wanted openssh-server openssh-client"
  if [ -n "$wanted" ]; then
    if [ "$(id -u)" = 0 ]; then
      (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $wanted >/dev/null) \
        || echo "setup:$wanted not installed: the tests that need them will be skipped with the reason" >&2
    else
      echo "setup: install Debian's$wanted for the tests that need them (they are skipped otherwise)" >&2
    fi
  fi
else
  $PY -m pip install -q --disable-pip-version-check -e ".[all]" 2>&1 | grep -v "as the 'root' user" || true
fi
# an editable install is not byte-compiled by pip (a wheel install is): compile it once, so every worker process
# (one per case) and test process does not compile xpubench's sources again where PYTHONDONTWRITEBYTECODE is set
$PY -m compileall -q src >/dev/null || true
$PY -c "import xpubench, torch, jax, flax, optax, httpx" || { echo "setup: install failed" >&2; exit 1; }
