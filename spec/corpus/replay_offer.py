# SPDX-License-Identifier: MIT OR Apache-2.0
"""What an adapter's ``describe`` offers of ``replay``, and the names its requests carry.

An adapter is sent only the wire names that existed in the protocol it
implements (docs/protocol-replay.md, "Which names an adapter is sent"). A
``describe`` that lists its pipelines is sent them, each by the name it
lists; one with no ``replay`` member was written, or could have been, before
such a member existed, when the replay operation knew two pipelines by their
first names: it is sent those alone, by those names (:data:`FIRST_OFFER`),
and every later pipeline's case is skipped as not offered, never failed. A
``describe`` that names its protocol version (:mod:`..harness.versions`) is
sent only what that version had, by the names it had. Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final

from ..harness.protocol import encode
from ..harness.replay_wire import (
    PIPELINE_ALIASES,
    ReplayLayout,
    batch_forms,
    current_pipeline,
)
from ..harness.versions import (
    FORMS_SINCE,
    PIPELINES_SINCE,
    RENAME,
    REPLAY,
    REPLAY_BATCH,
    ProtocolVersion,
    ProtocolVersionError,
    described_version,
)
from .protocol_run import CaseResult

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .protocol_cases import Case

__all__ = [
    "FIRST_OFFER",
    "FIRST_PIPELINES",
    "FORM_LISTED",
    "FORM_NOT_LISTED",
    "NOT_A_FIRST_PIPELINE",
    "NOT_IN_ITS_VERSION",
    "ReplayCase",
    "ReplayOffer",
    "ReplayOfferError",
    "not_offered",
    "replay_offer",
    "split_offered",
    "spoken",
    "spoken_cases",
]

#: A skipped batch case's detail, for a form of entry its adapter's describe does not list.
FORM_NOT_LISTED: Final = "not offered: the adapter's describe does not list batch form {}"
#: A skipped refusal's detail, for an adapter that offers the form the request would use.
FORM_LISTED: Final = (
    "not a refusal here: the adapter's describe lists batch form {}, which allows the request"
)
#: The pipelines of protocol version 2's first ``replay`` operation, by the
#: names the page gave them then: all that an adapter whose ``describe`` has
#: no ``replay`` member can be known to compute.
FIRST_PIPELINES: Final = ("float64", "bf16-rows-fp32-state")
#: A skipped case's detail, for a later pipeline and a describe that lists none.
NOT_A_FIRST_PIPELINE: Final = (
    "not offered: the adapter's describe lists no pipelines, so it is sent only the "
    f"first ones of protocol 2 ({', '.join(FIRST_PIPELINES)}), not {{}}"
)

#: A skipped case's detail, for what the protocol version its describe names did not have yet.
NOT_IN_ITS_VERSION: Final = (
    "not offered: the adapter's describe names protocol {}, which had no {} (added in {})"
)


@dataclass(frozen=True)
class ReplayCase:
    """One replay case as sent: its request, the state expected after each round, its bound."""

    case_id: str
    clauses: list[str]
    pipeline: str
    request: dict[str, object]
    #: One ``{"conv": ..., "h": ...}`` of float.hex strings per round.
    expected: list[dict[str, object]]
    #: The relative bound ``max |actual - expected| / max |expected|`` per field.
    tolerance: float
    #: The request's layout, ``pre-conv`` or ``post-conv``.
    layout: str = "pre-conv"
    #: The design whose lifecycle the case's rounds follow, when the case names one.
    design: str | None = None
    #: The bound for an implementation compared with itself (check's replay
    #: properties), when the case file states one apart ("self"); else ``tolerance``.
    self_tolerance: float | None = None
    #: A case judged against the implementation itself (``batch_alone.json``): the
    #: pairs ``(i, j)`` of replied states that must be the same within ``tolerance``
    #: (0 but for an engine whose kernels differ), and ``expected`` empty (RB-REPLAY-13).
    alone: tuple[tuple[int, int], ...] = ()
    #: The states ``tolerance`` holds for, where not every one: an alone case's
    #: ``rerouted`` entries (``batch_alone.json``), each other state bit for bit.
    #: None: every state within ``tolerance``.
    bounded: frozenset[int] | None = None
    #: A case of ``refusals.json``: True when its only allowed reply is
    #: ``bad-request``, False when it is at a rule's bound and must be answered
    #: with ``expected``; None for every other case.
    refused: bool | None = None
    #: A refusal sent only to an adapter whose describe does not list this batch form.
    without_form: str | None = None

    def bound(self, number: int, /) -> float:
        """The bound of state ``number``: ``tolerance``, or 0 where ``bounded`` leaves it out."""
        return self.tolerance if self.bounded is None or number in self.bounded else 0.0


class ReplayOfferError(ValueError):
    """A ``describe`` reply states what its replay offers in a shape the protocol lacks."""


@dataclass(frozen=True)
class ReplayOffer:
    """What an adapter's ``describe`` says its ``replay`` computes (docs/protocol-replay.md).

    A case is offered when its pipeline and its layout are listed and, if the
    case names a design, its design is listed.
    """

    #: The pipelines, by their current names (an old name listed counts as its current one).
    pipelines: frozenset[str]
    layouts: frozenset[str]
    designs: frozenset[str]
    #: The pipelines the describe lists by an old name alone, as (current name,
    #: old name): requests carry the old name to it (docs/protocol.md, "Changes",
    #: 2.4).
    old_names: frozenset[tuple[str, str]] = frozenset()
    #: The forms of ``replay_batch`` entry beyond the first that it lists
    #: (``batch``, optional: none when absent).
    batch: frozenset[str] = frozenset()
    #: False for :data:`FIRST_OFFER`, which no describe stated: it takes every
    #: design, since a design could not be listed yet.
    stated: bool = True
    #: The protocol version the describe names, if it names one.
    protocol: ProtocolVersion | None = None


#: The offer of a ``describe`` with no ``replay`` member: the first pipelines,
#: by their first names, in either layout, whatever design a case names.
FIRST_OFFER: Final = ReplayOffer(
    frozenset(current_pipeline(name) for name in FIRST_PIPELINES),
    frozenset(layout.value for layout in ReplayLayout),
    frozenset(),
    frozenset(
        (current_pipeline(name), name) for name in FIRST_PIPELINES if current_pipeline(name) != name
    ),
    stated=False,
)

_OFFER_KEYS: Final = ("pipelines", "layouts", "designs")


def replay_offer(reply: dict[str, object], /) -> ReplayOffer:
    """What a ``describe`` reply offers of ``replay``: :data:`FIRST_OFFER` when it does not say.

    An adapter that names a version before the rename is sent each old name
    (docs/protocol-replay.md, "Which names an adapter is sent").

    Raises:
        ReplayOfferError: the reply's ``replay`` member is not an object of
            three lists of strings, ``pipelines``, ``layouts`` and ``designs``,
            or its ``protocol`` member is not a version this suite knows.
    """
    value = reply.get("ok")
    try:
        version = described_version(value) if isinstance(value, dict) else None
    except ProtocolVersionError as error:
        raise ReplayOfferError(str(error)) from None
    offer = _stated(value) or FIRST_OFFER
    if version is None:
        return offer
    # Only what the version had: its pipelines and forms, by the names it had.
    pipelines = frozenset(
        name for name in offer.pipelines if PIPELINES_SINCE.get(name, REPLAY) <= version
    )
    forms = frozenset(form for form in offer.batch if FORMS_SINCE.get(form, REPLAY) <= version)
    old_names = offer.old_names
    if version < RENAME:
        old = {current: name for name, current in PIPELINE_ALIASES.items()}
        old_names |= {(name, old[name]) for name in pipelines if name in old}
    return replace(offer, pipelines=pipelines, batch=forms, old_names=old_names, protocol=version)


def _stated(value: object, /) -> ReplayOffer | None:
    offer = value.get("replay") if isinstance(value, dict) else None
    if offer is None:
        return None
    if not isinstance(offer, dict):
        raise ReplayOfferError(f"describe's replay must be an object, got {encode(offer)}")
    lists: list[frozenset[str]] = []
    for key in _OFFER_KEYS:
        names = offer.get(key)
        if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
            raise ReplayOfferError(
                f"describe's replay.{key} must be a list of strings, got {encode({key: names})}"
            )
        lists.append(frozenset(names))
    listed, layouts, designs = lists
    old_names = frozenset(
        (current_pipeline(name), name)
        for name in listed
        if current_pipeline(name) != name and current_pipeline(name) not in listed
    )
    pipelines = frozenset(current_pipeline(name) for name in listed)
    forms = offer.get("batch", [])
    if not isinstance(forms, list) or not all(isinstance(form, str) for form in forms):
        raise ReplayOfferError(
            f"describe's replay.batch must be a list of strings, got {encode({'batch': forms})}"
        )
    return ReplayOffer(pipelines, layouts, designs, old_names, frozenset(forms))


def spoken(request: dict[str, object], offer: ReplayOffer | None, /) -> dict[str, object]:
    """``request`` with its pipeline named as ``offer``'s describe lists it."""
    old = dict(offer.old_names).get(str(request.get("pipeline"))) if offer else None
    return request if old is None else request | {"pipeline": old}


def not_offered(case: ReplayCase, offer: ReplayOffer | None, /) -> str | None:  # noqa: C901, PLR0911 (one return a reason)
    """Why ``case`` is not offered by an adapter whose describe states ``offer``, or None.

    None for ``offer`` sends every case as it is. A form of batch entry beyond
    the first is offered only when listed: an adapter written before it
    refuses it, and is not failed for that.
    """
    too_new = _not_in_version(case, None if offer is None else offer.protocol)
    if too_new is not None:
        return too_new
    listed = frozenset() if offer is None else offer.batch
    if case.without_form is not None and case.without_form in listed:
        return FORM_LISTED.format(case.without_form)
    # A refusal's request is a refusal whatever forms are offered, unless it names one.
    if case.request["op"] == "replay_batch" and case.refused is None:
        for form in sorted(batch_forms(case.request), key=lambda form: form.value):
            if form.value not in listed:
                return FORM_NOT_LISTED.format(form.value)
    if offer is None:
        return None
    if current_pipeline(case.pipeline) not in offer.pipelines:
        if not offer.stated:
            return NOT_A_FIRST_PIPELINE.format(case.pipeline)
        return f"not offered: the adapter's describe does not list pipeline {case.pipeline}"
    if case.layout not in offer.layouts:
        return f"not offered: the adapter's describe does not list layout {case.layout}"
    if offer.stated and case.design is not None and case.design not in offer.designs:
        return f"not offered: the adapter's describe does not list design {case.design}"
    return None


def _not_in_version(case: ReplayCase, version: ProtocolVersion | None, /) -> str | None:
    """Why ``case`` is not for an adapter of protocol ``version``, or None (None: any)."""
    if version is None:
        return None
    op = str(case.request["op"])
    needs = [(op, REPLAY_BATCH if op == "replay_batch" else REPLAY)]
    # A pipeline no version had is a refusal's, sent to every version.
    since = PIPELINES_SINCE.get(current_pipeline(case.pipeline), REPLAY)
    needs.append((f"pipeline {case.pipeline}", since))
    # A refusal is sent whatever its version: an adapter of any version refuses it.
    if op == "replay_batch" and case.refused is None:
        forms = sorted(form.value for form in batch_forms(case.request))
        needs += [(f"batch form {form}", FORMS_SINCE[form]) for form in forms]
    for what, since in needs:
        if version < since:
            return NOT_IN_ITS_VERSION.format(version, what, since)
    return None


def split_offered(
    cases: Sequence[ReplayCase], offer: ReplayOffer | None, /
) -> tuple[list[ReplayCase], list[CaseResult]]:
    """The cases ``offer`` covers, as sent (each pipeline as it lists it), the rest skipped."""
    sent: list[ReplayCase] = []
    skipped: list[CaseResult] = []
    for case in cases:
        reason = not_offered(case, offer)
        if reason is None:
            sent.append(replace(case, request=spoken(case.request, offer)))
        else:
            skipped.append(CaseResult(case.case_id, case.clauses, "skipped", reason))
    return sent, skipped


def spoken_cases(cases: Sequence[Case], sent: Sequence[ReplayCase], /) -> list[Case]:
    """``cases``, each replay case's request as ``sent`` (from :func:`split_offered`) holds it."""
    requests = {case.case_id: case.request for case in sent}
    return [case | {"request": requests.get(case["id"], case["request"])} for case in cases]
