# SPDX-License-Identifier: MIT OR Apache-2.0
"""The serving judge: speculative against plain decoding, through any OpenAI-compatible server.

:mod:`.client` reaches a server, :mod:`.dialects` holds each engine's small
departures from the OpenAI API as data, :mod:`.workload` draws the requests,
:mod:`.judge` compares two runs within a noise bound, :mod:`.run` sends the
workload and measures that bound on the engine, :mod:`.shrink` shrinks a
failure, :mod:`.verdict` says and records the result, and :mod:`.launch`
starts servers from commands and ends them. Standard library only; engine-agnostic
(docs/serving.md).
"""

from __future__ import annotations

__all__: list[str] = []
