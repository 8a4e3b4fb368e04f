"""Build llama.cpp's llama-bench, llama-quantize and llama-server into xpubench's cache, once per CPU kind.

    python -m xpubench.backends.llamacpp_.build [--adopt BUILD_DIR] [--source DIR] [--jobs N]

The source is the pinned ``llama-cpp-python`` source package (binaries.PINNED), which vendors llama.cpp:
``pip download`` fetches it (a package registry is all it needs), or ``--source`` names an unpacked one.
CMake (Ninja, Release, static libraries, no OpenSSL or curl, no web UI download) compiles only the three
programs, with the CPU's instruction sets given explicitly from /proc/cpuinfo (binaries.CPU_OPTIONS;
never GGML_NATIVE, never AMX), into ``<cache>/llamacpp/<version>-<flags digest>/bin`` with ``build.json``
(version, llama.cpp commit, CMake flags, seconds). A cached build is reused; ``--adopt`` copies the
programs of a finished build folder (its CMakeCache.txt says its flags) instead of compiling again.
Exit status 0 with the folder printed, 1 with the reason on a failure.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from xpubench.backends.llamacpp_.binaries import (
    BENCH,
    CPU_OPTIONS,
    PINNED,
    QUANTIZE,
    SERVER,
    build_key,
    cache_root,
    cpu_flags,
    cpu_options,
)

PROGRAMS = (BENCH, QUANTIZE, SERVER)
FIXED = {"CMAKE_BUILD_TYPE": "Release", "BUILD_SHARED_LIBS": "OFF", "GGML_NATIVE": "OFF", "GGML_CCACHE": "OFF",
         "LLAMA_CURL": "OFF", "LLAMA_OPENSSL": "OFF", "LLAMA_USE_PREBUILT_UI": "OFF", "LLAMA_BUILD_TESTS": "OFF",
         "LLAMA_BUILD_EXAMPLES": "OFF", "GGML_AMX_TILE": "OFF", "GGML_AMX_INT8": "OFF", "GGML_AMX_BF16": "OFF"}


def cmake_flags(options: dict[str, bool], commit: str) -> list[str]:
    values = {**FIXED, **{k: "ON" if v else "OFF" for k, v in options.items()},
              "LLAMA_BUILD_COMMIT": commit, "LLAMA_BUILD_NUMBER": "0"}
    return [f"-D{k}={v}" for k, v in values.items()]


def vendored_commit(source: Path) -> str:
    """The llama.cpp commit the source package vendors (its CHANGELOG's latest "update llama.cpp to")."""
    try:
        m = re.search(r"llama\.cpp@([0-9a-f]{7,40})", (source / "CHANGELOG.md").read_text(errors="replace"))
    except OSError:
        return "unknown"
    return m.group(1) if m else "unknown"


def fetch_source(work: Path) -> Path:
    """``pip download`` the pinned source package into ``work`` and unpack it; its folder."""
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                    "--disable-pip-version-check", "-q", "-d", str(work), f"llama-cpp-python=={PINNED}"], check=True)
    archive = next(work.glob("llama_cpp_python-*.tar.gz"))
    with tarfile.open(archive) as tar:
        tar.extractall(work, filter="data")
    return work / f"llama_cpp_python-{PINNED}"


def install(programs_dir: Path, dest: Path, record: dict) -> Path:
    """Copy the programs into ``dest/bin`` (through a temporary folder: a half-copied build is never found)
    and write ``dest/build.json``."""
    tmp = Path(tempfile.mkdtemp(prefix=".installing-", dir=dest.parent))
    (tmp / "bin").mkdir()
    copied = [name for name in PROGRAMS if (programs_dir / name).is_file()]
    for name in copied:
        shutil.copy2(programs_dir / name, tmp / "bin" / name)
    (tmp / "build.json").write_text(json.dumps({**record, "programs": copied}, indent=2))
    shutil.rmtree(dest, ignore_errors=True)
    os.replace(tmp, dest)
    return dest


def adopted_options(build_dir: Path) -> dict[str, bool]:
    """The CPU options of an existing CMake build folder (its CMakeCache.txt)."""
    text = (build_dir / "CMakeCache.txt").read_text(errors="replace")
    found = dict(re.findall(r"^(GGML_\w+):BOOL=(ON|OFF)$", text, re.MULTILINE))
    return {option: found.get(option) == "ON" for option, _ in CPU_OPTIONS}


def adopt(build_dir: Path, flags: set[str]) -> Path:
    options = adopted_options(build_dir)
    lacking = [o for o, needs in CPU_OPTIONS if options[o] and not all(n in flags for n in needs)]
    if lacking:
        raise RuntimeError(f"{build_dir} was compiled with {', '.join(lacking)}, which this CPU lacks")
    for name in (BENCH, QUANTIZE):
        if not (build_dir / "bin" / name).is_file():
            raise RuntimeError(f"{build_dir}/bin has no {name}: the build is not finished")
    dest = cache_root() / build_key(options)
    dest.parent.mkdir(parents=True, exist_ok=True)
    text = (build_dir / "CMakeCache.txt").read_text(errors="replace")
    source = re.search(r"^CMAKE_HOME_DIRECTORY:INTERNAL=(.*)$", text, re.MULTILINE)
    commit = vendored_commit(Path(source.group(1)).parents[1]) if source else "unknown"
    record = {"version": f"llama-cpp-python {PINNED} (llama.cpp {commit})", "llama_cpp_python": PINNED,
              "commit": commit, "cpu_options": options, "adopted_from": str(build_dir),
              "cmake": sorted(f"{k}={v}" for k, v in re.findall(r"^((?:GGML|LLAMA)_\w+|CMAKE_BUILD_TYPE"
                                                                 r"|BUILD_SHARED_LIBS):\w+=(.*)$", text, re.MULTILINE)
                              if k in FIXED or k in options),
              "built": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
    return install(build_dir / "bin", dest, record)


def build(flags: set[str], source: Path | None, jobs: int) -> Path:
    options = cpu_options(flags)
    dest = cache_root() / build_key(options)
    if (dest / "bin" / BENCH).is_file():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="llamacpp-build-") as work:
        source = source or fetch_source(Path(work))
        commit = vendored_commit(source)
        flags_list = cmake_flags(options, commit)
        out = Path(work) / "build"
        subprocess.run(["cmake", "-S", str(source / "vendor" / "llama.cpp"), "-B", str(out), "-G", "Ninja",
                        *flags_list], check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["cmake", "--build", str(out), "-j", str(jobs), "--target", *PROGRAMS], check=True,
                       stdout=subprocess.DEVNULL)
        seconds = round(time.monotonic() - started)
        record = {"version": f"llama-cpp-python {PINNED} (llama.cpp {commit})", "llama_cpp_python": PINNED,
                  "commit": commit, "cpu_options": options, "cmake": flags_list, "seconds": seconds, "jobs": jobs,
                  "built": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
        return install(out / "bin", dest, record)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="build_llamacpp", description=__doc__.split("\n\n")[0])
    parser.add_argument("--adopt", type=Path, help="a finished CMake build folder of the same source to copy")
    parser.add_argument("--source", type=Path, help=f"an unpacked llama_cpp_python-{PINNED} source folder")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    flags = cpu_flags()
    try:
        if args.adopt is not None:
            dest = adopt(args.adopt, flags)
        else:
            dest = build(flags, args.source, args.jobs)
    except (OSError, RuntimeError, subprocess.CalledProcessError, StopIteration, tarfile.TarError) as exc:
        print(f"build_llamacpp: failed: {exc}", file=sys.stderr)
        return 1
    print(dest / "bin")
    return 0


if __name__ == "__main__":
    sys.exit(main())
