#!/usr/bin/env bash
# SPDX-License-Identifier: MIT OR Apache-2.0
# Make the planners tier's own venv (default .planners/venv, or $PLANNERS_VENV):
# torch 2.13.0's CPU build, vLLM 0.33.0, SGLang 0.5.23 and the packages their planners import,
# all pinned and installed without dependency resolution (tests/planners/requirements.txt).
set -euo pipefail
cd "$(dirname "$0")/../.."
venv="${PLANNERS_VENV:-.planners/venv}"
if [ ! -x "$venv/bin/python" ]; then
    python -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --upgrade pip
# --no-compile: the planners import a small part of torch, vLLM and SGLang,
# so the install does not compile every module of them to bytecode.
"$venv/bin/python" -m pip install -q --no-deps --no-compile -r tests/planners/requirements.txt
"$venv/bin/python" -c "import torch, vllm; print('planners venv:', torch.__version__, vllm.__version__)"
"$venv/bin/python" -m pip show sglang | grep '^Version: 0.5.23$'
