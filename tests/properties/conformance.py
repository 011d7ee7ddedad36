# SPDX-License-Identifier: MIT OR Apache-2.0
"""Judging an implementation's reply by the reference model."""

from __future__ import annotations

from typing import TYPE_CHECKING

from spec.harness.oracle import allowed_replies
from spec.harness.protocol import encode, reply_matches

if TYPE_CHECKING:
    from collections.abc import Mapping

    from spec.harness.driver import Implementation


def exchange(impl: Implementation, request: Mapping[str, object], /) -> dict[str, object]:
    """Send ``request`` and require a reply the model allows; return the reply."""
    reply = impl.request(request)
    allowed = allowed_replies(request)
    assert any(reply_matches(reply, expected) for expected in allowed), (
        f"{impl.name} replied against the model\n"
        f"  request: {encode(request)}\n"
        f"  reply:   {encode(reply)}\n"
        f"  allowed: {' or '.join(encode(expected) for expected in allowed)}"
    )
    return reply


def ok_value(impl: Implementation, request: Mapping[str, object], /) -> object:
    """The ``ok`` value of a reply the model allows, or None for an error reply."""
    return exchange(impl, request).get("ok")
