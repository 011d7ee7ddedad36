# SPDX-License-Identifier: MIT OR Apache-2.0
"""The ``--ssm-rollback-mode`` option for an :mod:`argparse` command line."""

from __future__ import annotations

import argparse

from .rollback import SsmRollbackMode, UnknownSsmRollbackModeError, parse_ssm_rollback_mode

__all__ = ["add_ssm_rollback_mode_argument"]


def _mode_argument(text: str, /) -> SsmRollbackMode:
    try:
        return parse_ssm_rollback_mode(text)
    except UnknownSsmRollbackModeError as error:
        # argparse prints this text after "argument --ssm-rollback-mode: ",
        # so the user sees the parse's exact error (RB-PARSE-2).
        raise argparse.ArgumentTypeError(str(error)) from None


def add_ssm_rollback_mode_argument(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, /
) -> argparse.Action:
    """Add ``--ssm-rollback-mode`` (default ``snapshot``), parsed by the contract's parse.

    The parsed value is an :class:`SsmRollbackMode`; a bad value fails with
    the parse's exact error text. Implements RB-PARSE-1 and RB-PARSE-2.
    """
    return parser.add_argument(
        "--ssm-rollback-mode",
        type=_mode_argument,
        default=SsmRollbackMode.SNAPSHOT,
        metavar="{snapshot,replay}",
        help="how a partial accept rolls SSM state back (default: snapshot; "
        "replay boots but refuses every speculative verify)",
    )
