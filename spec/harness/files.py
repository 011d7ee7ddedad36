# SPDX-License-Identifier: MIT OR Apache-2.0
"""Reading the JSON files a user names, bounded in size and depth."""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING, Final

from .protocol import TooDeepError, loads_bounded

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["MAX_FILE_BYTES", "MAX_FILE_DEPTH", "JsonFileError", "read_json_file"]

#: The largest file read: a config, a deviation list or one corpus file.
MAX_FILE_BYTES: Final = 16 << 20

#: The deepest nesting of arrays and objects a file may have.
MAX_FILE_DEPTH: Final = 32


class JsonFileError(ValueError):
    """A file that cannot be read as a bounded JSON document."""


def read_json_file(path: Path, /) -> object:
    """The JSON document in ``path``, a regular file of at most ``MAX_FILE_BYTES``.

    Anything that is not a regular file (a directory, a FIFO, a device) is
    refused before it is opened, so no read can block or run without end.

    Raises:
        JsonFileError: the file is missing, not regular, too large, not
            UTF-8, not JSON, or nested deeper than ``MAX_FILE_DEPTH``.
    """
    try:
        status = path.stat()
    except OSError as error:
        raise JsonFileError(error.strerror or str(error)) from None
    if not stat.S_ISREG(status.st_mode):
        raise JsonFileError("not a regular file")
    if status.st_size > MAX_FILE_BYTES:
        raise JsonFileError(f"larger than {MAX_FILE_BYTES} bytes")
    try:
        # Non-blocking, so that a file swapped for a FIFO since the check
        # cannot hold the open.
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(descriptor, "rb") as file:
            data = file.read(MAX_FILE_BYTES + 1)
    except OSError as error:
        raise JsonFileError(error.strerror or str(error)) from None
    if len(data) > MAX_FILE_BYTES:
        raise JsonFileError(f"larger than {MAX_FILE_BYTES} bytes")
    try:
        return loads_bounded(data.decode("utf-8"), MAX_FILE_DEPTH)
    except UnicodeDecodeError as error:
        raise JsonFileError(f"not UTF-8: {error}") from None
    except TooDeepError as error:
        raise JsonFileError(str(error)) from None
    except ValueError as error:
        raise JsonFileError(f"not JSON: {error}") from None
