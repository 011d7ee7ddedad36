#!/usr/bin/env bash
# SPDX-License-Identifier: MIT OR Apache-2.0
# Make the planners tier's own venv (default .planners/venv, or $PLANNERS_VENV):
# torch 2.13.0's CPU build, vLLM 0.33.0, SGLang 0.5.23 and the packages their planners import,
# all pinned and installed without dependency resolution (tests/planners/requirements.txt).
set -euo pipefail
cd "$(dirname "$0")/../.."
venv="${PLANNERS_VENV:-.planners/venv}"
# The requirements' hash, written when they are installed: a venv that has them is
# not handed to pip again (pip takes seconds to find each of them installed).
pins="$(sha256sum tests/planners/requirements.txt | cut -c1-64)"
if [ ! -x "$venv/bin/python" ]; then
    python -m venv "$venv"
fi
if [ "$(cat "$venv/installed" 2>/dev/null)" != "$pins" ]; then
    rm -f "$venv/installed"
    "$venv/bin/python" -m pip install -q --upgrade pip
    # --no-compile: the planners import a small part of torch, vLLM and SGLang,
    # so the install does not compile every module of them to bytecode.
    "$venv/bin/python" -m pip install -q --no-deps --no-compile -r tests/planners/requirements.txt
fi
# What they import is compiled once, when first imported, into a bytecode cache kept
# with the venv, whatever the environment says: not once per clone (tests/conftest.py's
# PYTHONPYCACHEPREFIX) nor in every run (PYTHONDONTWRITEBYTECODE).
site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "import sys; sys.pycache_prefix = '$(cd "$venv" && pwd)/pycache'; sys.dont_write_bytecode = False" > "$site/ssm_planners_bytecode.pth"
"$venv/bin/python" -c "import torch, vllm; print('planners venv:', torch.__version__, vllm.__version__)"
"$venv/bin/python" -m pip show sglang | grep '^Version: 0.5.23$'
echo "$pins" > "$venv/installed"
