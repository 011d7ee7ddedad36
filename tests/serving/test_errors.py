# SPDX-License-Identifier: MIT OR Apache-2.0
"""errors: one class per thing that can go wrong before a verdict."""

from __future__ import annotations

from ssm_rollback_spec.serving.errors import (
    NotOpenAICompatibleError,
    PromptsFileError,
    ServerFailedError,
    ServersDifferError,
    ServerStartError,
    ServerUnreachableError,
)


def test_a_failed_server_names_its_role_in_its_one_line() -> None:
    error = ServerFailedError("target", "did not answer request 3 within 1 s")
    assert str(error) == "the target server did not answer request 3 within 1 s"
    assert error.role == "target"


def test_each_error_is_of_the_builtin_kind_a_caller_would_catch() -> None:
    assert issubclass(ServerUnreachableError, ConnectionError)
    assert issubclass(NotOpenAICompatibleError, ValueError)
    assert issubclass(ServersDifferError, ValueError)
    assert issubclass(PromptsFileError, ValueError)
    assert issubclass(ServerFailedError, RuntimeError)
    assert issubclass(ServerStartError, RuntimeError)
