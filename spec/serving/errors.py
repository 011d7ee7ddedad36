# SPDX-License-Identifier: MIT OR Apache-2.0
"""What can go wrong before a verdict: one exception class per concept, each one line.

Each message names what the user gave (the URL, the file and line, the
command) and what was wrong with it. A server that fails a request under
speculation is no error of this module: it is the verdict's (``FAIL``).
"""

from __future__ import annotations

__all__ = [
    "NotOpenAICompatibleError",
    "PromptsFileError",
    "ServerFailedError",
    "ServerStartError",
    "ServerUnreachableError",
    "ServersDifferError",
]


class ServerUnreachableError(ConnectionError):
    """A base URL at which nothing answers."""


class NotOpenAICompatibleError(ValueError):
    """A server that answers, but not as an OpenAI-compatible server does."""


class ServersDifferError(ValueError):
    """A reference and a target that serve different models or vocabularies."""


class PromptsFileError(ValueError):
    """A ``--prompts`` file that cannot be read, or a line of it that is not a request."""


class ServerFailedError(RuntimeError):
    """A server that died, hung or refused a request mid-run.

    ``role`` says which (``reference`` or ``target``): the target's failure is
    a verdict on the engine, the reference's ends the run. ``answered`` is
    True when the server said what went wrong (an HTTP error status), False
    when it went silent or dropped the connection.
    """

    def __init__(self, role: str, message: str, /, *, answered: bool = False) -> None:
        super().__init__(f"the {role} server {message}")
        self.role = role
        self.answered = answered


class ServerStartError(RuntimeError):
    """A server command that exited, or never answered, before it was ready."""
