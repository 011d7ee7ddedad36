# SPDX-License-Identifier: MIT OR Apache-2.0
"""The corpus floor: where a case is made, written, loaded, checked, run and judged.

Both corpora pass through here and nowhere else. The protocol corpus
(``vectors/``) is made from the model by :mod:`.protocol_cases` and read back,
run and judged by :mod:`.protocol_run`; the replay corpus (``vectors/replay/``)
is made by :mod:`.replay_cases` (numpy, the ``replay`` extra; its generators
:mod:`.replay_windows`, :mod:`.replay_decodes` and :mod:`.replay_batches` draw
as :mod:`.replay_draws` says, and :mod:`.replay_format` is its JSON, read back into the model) and
judged within its pipeline's bound by :mod:`.replay_run`; its round scripts of
the ``model`` operation are made by :mod:`.model_cases` and judged by the
equalities they state by :mod:`.model_run`. :mod:`.files` is
the one file format both share: case files, the manifest that pins them, and
the JSON schemas in ``schemas/`` shipped beside the code. Everything but the
replay generators and :mod:`.replay_format` is standard library, so running
a corpus needs no numpy.
"""

from __future__ import annotations

from .files import VectorError
from .model_run import (
    MODEL_NOT_DESCRIBED,
    MODEL_NOT_OFFERED,
    ModelCase,
    load_model_cases,
    model_as_cases,
    model_judges,
)
from .protocol_cases import Case, exported_case, generate, render_corpus, write_corpus
from .protocol_run import (
    EXITFIRST_HELP,
    STOPPED,
    CaseResult,
    Judge,
    is_contested_race,
    load_cases,
    run_cases,
)
from .replay_run import (
    BATCH_NOT_OFFERED,
    FORM_NOT_LISTED,
    NOT_OFFERED,
    ReplayCase,
    ReplayOffer,
    ReplayOfferError,
    as_cases,
    judge_replay,
    load_replay_cases,
    not_offered,
    replay_offer,
    split_offered,
    spoken_cases,
)

__all__ = [
    "BATCH_NOT_OFFERED",
    "EXITFIRST_HELP",
    "FORM_NOT_LISTED",
    "MODEL_NOT_DESCRIBED",
    "MODEL_NOT_OFFERED",
    "NOT_OFFERED",
    "STOPPED",
    "Case",
    "CaseResult",
    "Judge",
    "ModelCase",
    "ReplayCase",
    "ReplayOffer",
    "ReplayOfferError",
    "VectorError",
    "as_cases",
    "exported_case",
    "generate",
    "is_contested_race",
    "judge_replay",
    "load_cases",
    "load_model_cases",
    "load_replay_cases",
    "model_as_cases",
    "model_judges",
    "not_offered",
    "render_corpus",
    "replay_offer",
    "run_cases",
    "split_offered",
    "spoken_cases",
    "write_corpus",
]
