#!/usr/bin/env bash
# Builds llama.cpp's llama-bench, llama-quantize and llama-server (the pinned llama-cpp-python source package's
# vendored llama.cpp, CPU flags from /proc/cpuinfo) into ~/.cache/xpubench/llamacpp/<version>-<flags>/bin, once:
# a cached build is reused. 21 CPU-minutes (~11 min on 2 idle cores) when not cached (backends/llamacpp_/build.py says how).
#   bash scripts/build_llamacpp.sh                      -> build (or reuse) for this CPU
#   bash scripts/build_llamacpp.sh --adopt BUILD_DIR    -> copy a finished CMake build of the same source instead
#   bash scripts/build_llamacpp.sh --source DIR         -> an unpacked llama_cpp_python source, no download
# Needs cmake, ninja and a C++ compiler; cmake and ninja come from PyPI when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
for tool in cmake ninja; do
  command -v "$tool" >/dev/null 2>&1 || $PY -m pip install -q --disable-pip-version-check "$tool" 2>&1 \
    | grep -v "as the 'root' user" || true
done
command -v c++ >/dev/null 2>&1 || { echo "build_llamacpp: no C++ compiler (apt-get install g++)" >&2; exit 1; }
start=$(date +%s)
PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" $PY -m xpubench.backends.llamacpp_.build "$@"
echo "build_llamacpp: done in $(( $(date +%s) - start )) s" >&2
