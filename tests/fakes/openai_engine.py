# SPDX-License-Identifier: MIT OR Apache-2.0
"""The toy serving engine the wheel ships for serve-check's self-test, as the tests start it.

``python -m tests.fakes.openai_engine`` is ``python -m ssm_rollback_spec.serving.toy``.
"""

from __future__ import annotations

from ssm_rollback_spec.serving.toy import Config, ToyEngine, main, serving

__all__ = ["Config", "ToyEngine", "main", "serving"]

if __name__ == "__main__":
    raise SystemExit(main())
