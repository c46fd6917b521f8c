#!/usr/bin/env bash
# Install llama-cpp-python (the local LLM runtime) into .venv: scripts/test.sh and scripts/demo.sh
# both call this, so the build flags and the pin live in one place.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# llama-cpp-python is built from source: build only the library (about 8 minutes on 2 cores).
# Portable x86-64-v3 code, not -march=native: on CPUs with AMX (Sapphire Rapids and later) a
# native build uses ggml's AMX kernels, which crash with a general protection fault on the
# first request in virtual machines (llama.cpp#20824). x86-64-v3 (AVX2) runs on x86 CPUs of
# 2013 and later; on other architectures these x86 options are ignored.
export CMAKE_ARGS="${CMAKE_ARGS:--DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_BMI2=ON -DGGML_FMA=ON -DGGML_F16C=ON}"
# Without pip's wheel cache, so a wheel cached by an older build (other flags) is never reused;
# a virtualenv that already has it installs nothing here. Keep the pin equal to pyproject.toml's.
.venv/bin/python -m pip install --quiet --no-cache-dir 'llama-cpp-python[server]==0.3.36'
