# SPDX-License-Identifier: MIT OR Apache-2.0
"""Judging an implementation's reply by the reference model."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ssm_rollback_spec.harness.failures import NonConformingReply
from ssm_rollback_spec.harness.oracle import allowed_replies
from ssm_rollback_spec.harness.protocol import reply_matches

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ssm_rollback_spec.harness.driver import Implementation


def exchange(
    impl: Implementation,
    request: Mapping[str, object],
    /,
    *,
    line: str | None = None,
    allowed: Sequence[Mapping[str, object]] | None = None,
) -> dict[str, object]:
    """Send ``request`` and require a reply the model allows; return the reply.

    ``line`` is the exact text to send, when it is not ``request`` encoded;
    ``allowed`` replaces the model's replies where the protocol allows more
    than the model says (a byte order mark may be read or refused).

    Raises:
        NonConformingReply: the reply is not one the model allows; it carries
            the request, so ``check`` can show and export the exchange.
    """
    reply = impl.request(request, line=line)
    if allowed is None:
        allowed = allowed_replies(request)
    if not any(reply_matches(reply, expected) for expected in allowed):
        raise NonConformingReply(request, reply, allowed, line=line)
    return reply


def ok_value(impl: Implementation, request: Mapping[str, object], /) -> object:
    """The ``ok`` value of a reply the model allows, or None for an error reply."""
    return exchange(impl, request).get("ok")
