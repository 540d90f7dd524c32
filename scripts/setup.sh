#!/usr/bin/env bash
# One entry point for a fresh machine: create (or reuse) a virtual environment, build
# llama-cpp-python with flags that suit this CPU, install specllama, then either start the main
# job or run the tests.
#
#   ./scripts/setup.sh start [specllama args...]   set up, then run specllama (default: chat)
#   ./scripts/setup.sh test  [pytest args...]      set up with the dev extra, then run pytest
#   ./scripts/setup.sh flags                       print the llama.cpp CMake flags it would use
#
# Environment: CMAKE_ARGS (your own llama.cpp flags, used as given), SPECLLAMA_VENV (default
# ./.venv), SPECLLAMA_CACHE (default $XDG_CACHE_HOME/specllama: built wheels and models live there),
# PYTHON (the interpreter to build the venv from, >= 3.11).
set -euo pipefail

LLAMA_CPP_PYTHON_VERSION=0.3.36   # keep in step with pyproject.toml
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${SPECLLAMA_VENV:-$repo/.venv}
cache=${SPECLLAMA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/specllama}
mode=${1:-start}
[ $# -gt 0 ] && shift

say() { printf '[setup] %s\n' "$*" >&2; }

cpu_has() { grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | tr ' ' '\n' | grep -qx "$1"; }

# llama.cpp's default GGML_NATIVE=ON also compiles the AMX kernels on CPUs that advertise AMX,
# and those crash in ggml_backend_amx_mul_mat on virtual machines. So on x86-64 we never build
# native: we name each instruction set the CPU really has and switch AMX off explicitly.
detect_cmake_args() {
    local os arch
    os=$(uname -s); arch=$(uname -m)
    if [ "$os" = Darwin ] && [ "$arch" = arm64 ]; then
        echo ""   # the default build: Metal on, NEON tuned by the compiler
        return
    fi
    if [ "$arch" != x86_64 ] && [ "$arch" != amd64 ]; then
        echo ""   # no known crash elsewhere; let llama.cpp pick
        return
    fi
    local f="-DGGML_NATIVE=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
    if [ "$os" = Darwin ]; then
        echo "$f -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
        return
    fi
    cpu_has avx2 && f="$f -DGGML_AVX=ON -DGGML_AVX2=ON"
    cpu_has fma && f="$f -DGGML_FMA=ON"
    cpu_has f16c && f="$f -DGGML_F16C=ON"
    # GGML_AVX512 compiles with -mavx512f/cd/vl/dq/bw together: require all five.
    if cpu_has avx512f && cpu_has avx512cd && cpu_has avx512vl && cpu_has avx512dq && cpu_has avx512bw; then
        f="$f -DGGML_AVX512=ON"
        cpu_has avx512vbmi && f="$f -DGGML_AVX512_VBMI=ON"
        cpu_has avx512_vnni && f="$f -DGGML_AVX512_VNNI=ON"
        cpu_has avx512_bf16 && f="$f -DGGML_AVX512_BF16=ON"
    fi
    cpu_has avx_vnni && f="$f -DGGML_AVX_VNNI=ON"
    echo "$f"
}

if [ -n "${CMAKE_ARGS+x}" ]; then
    cmake_args=$CMAKE_ARGS
    say "using your CMAKE_ARGS: ${cmake_args:-(empty: llama.cpp defaults)}"
else
    cmake_args=$(detect_cmake_args)
fi
if [ "$mode" = flags ]; then
    echo "$cmake_args"
    exit 0
fi

python=${PYTHON:-}
if [ -z "$python" ]; then
    for candidate in python3.13 python3.12 python3.11 python3; do
        if command -v "$candidate" >/dev/null && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            python=$candidate; break
        fi
    done
fi
[ -n "$python" ] || { say "specllama needs Python >= 3.11; set PYTHON=/path/to/python3.11"; exit 1; }

if ! "$venv/bin/python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    say "creating virtual environment $venv with $python"
    rm -rf "$venv"
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check)

# pip caches a wheel built from the sdist without regard to CMAKE_ARGS, so a flag change would be
# silently ignored. We keep our own wheel per (version, flags, interpreter) instead.
py_tag=$("$venv/bin/python" -c 'import sys, platform; print(f"cp{sys.version_info[0]}{sys.version_info[1]}-{platform.machine()}")')
key=$(printf '%s|%s|%s' "$LLAMA_CPP_PYTHON_VERSION" "$cmake_args" "$py_tag" | sha256sum 2>/dev/null || printf '%s|%s|%s' "$LLAMA_CPP_PYTHON_VERSION" "$cmake_args" "$py_tag" | shasum -a 256)
key=${key:0:16}
wheel_dir=$cache/wheels/llama-cpp-python-$LLAMA_CPP_PYTHON_VERSION-$key
stamp=$venv/.llama-cpp-python-build

if [ "$(cat "$stamp" 2>/dev/null)" != "$key" ]; then
    if ! ls "$wheel_dir"/llama_cpp_python-*.whl >/dev/null 2>&1; then
        say "building llama-cpp-python $LLAMA_CPP_PYTHON_VERSION (5-10 minutes on 2 cores) with: ${cmake_args:-defaults}"
        tmp_dir="$wheel_dir.partial.$$"
        rm -rf "$tmp_dir"; mkdir -p "$tmp_dir"
        CMAKE_ARGS="$cmake_args" CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)} \
            "${pip[@]}" wheel --no-deps --no-binary llama-cpp-python --no-cache-dir \
            -w "$tmp_dir" "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION"
        rm -rf "$wheel_dir"; mv "$tmp_dir" "$wheel_dir"   # a half-built wheel never sits under the final name
    fi
    say "installing llama-cpp-python from $wheel_dir"
    "${pip[@]}" install --quiet --force-reinstall --no-deps "$wheel_dir"/llama_cpp_python-*.whl
    echo "$key" > "$stamp"
fi

extra=""
[ "$mode" = test ] && extra="[dev]"
# Editable installs print setuptools warnings on every run; keep them in a log unless pip fails.
"${pip[@]}" install --quiet -e "$repo$extra" >"$venv/specllama-install.log" 2>&1 \
    || { cat "$venv/specllama-install.log" >&2; say "installing specllama failed"; exit 1; }

case "$mode" in
    start)
        if [ $# -eq 0 ]; then set -- chat; fi
        exec "$venv/bin/specllama" "$@" ;;
    test)
        cd "$repo"
        exec "$venv/bin/python" -m pytest "$@" ;;
    *)
        say "unknown mode '$mode': use start, test or flags"; exit 2 ;;
esac
