# SPDX-License-Identifier: MIT OR Apache-2.0
"""Python implementations of the contract, loaded by name (``--impl-module``).

An implementation is any module, or any object in a module, that exposes the
public names of :mod:`ssm_rollback_spec.rollback`: a vendored copy under another package
name, a port, or one of the self-test's wrong implementations. The harness
judges it through those names only, so a copy's own classes and exceptions
are the ones it is checked with.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final, Generic, Protocol, TypeVar

from .. import rollback

if TYPE_CHECKING:
    import types
    from collections.abc import Callable

__all__ = [
    "ARGPARSE_MODULE",
    "CELL_NAME",
    "REFERENCE",
    "REQUIRED_NAMES",
    "Cell",
    "ImplementationModuleError",
    "PythonImplementation",
    "RollbackApi",
    "fresh_module",
    "load_python_implementation",
]

#: The import path of the reference implementation.
REFERENCE: Final = rollback.__name__

#: The names an implementation must expose: the public names of ssm_rollback_spec.rollback.
REQUIRED_NAMES: Final = tuple(rollback.__all__)

#: The optional name of the implementation's first-write-wins cell type (RB-CELL-*).
CELL_NAME: Final = "FirstWriteWins"

_T = TypeVar("_T")


class Cell(Protocol, Generic[_T]):
    """The first-write-wins cell's Python API (``first_write_wins.FirstWriteWins``)."""

    def set(self, value: _T, /) -> _T: ...  # noqa: D102
    def get_or_init(self, default: _T, /) -> _T: ...  # noqa: D102
    def get(self) -> _T | None: ...  # noqa: D102


class RollbackApi(Protocol):
    """The public names of :mod:`ssm_rollback_spec.rollback`, which any implementation exposes."""

    # Read-only, so that an implementation's own subclasses satisfy them.
    @property
    def USIZE_MAX(self) -> int: ...  # noqa: D102, N802
    @property
    def SsmRollbackMode(self) -> type[rollback.SsmRollbackMode]: ...  # noqa: D102, N802
    @property
    def UnknownSsmRollbackModeError(self) -> type[ValueError]: ...  # noqa: D102, N802
    @property
    def SsmRollbackModeTypeError(self) -> type[TypeError]: ...  # noqa: D102, N802
    @property
    def UsizeTypeError(self) -> type[TypeError]: ...  # noqa: D102, N802
    @property
    def UsizeRangeError(self) -> type[ValueError]: ...  # noqa: D102, N802
    @property
    def SsmReplayBytesOverflowError(self) -> type[OverflowError]: ...  # noqa: D102, N802
    @property
    def VerifyRollbackUnsupportedError(self) -> type[NotImplementedError]: ...  # noqa: D102, N802

    def parse_ssm_rollback_mode(self, text: str, /) -> rollback.SsmRollbackMode: ...  # noqa: D102
    def set_ssm_rollback_mode(  # noqa: D102
        self, mode: rollback.SsmRollbackMode, /
    ) -> rollback.SsmRollbackMode: ...
    def ssm_rollback_mode(self) -> rollback.SsmRollbackMode: ...  # noqa: D102
    def ssm_replay_row_bytes(self, qkvz_elems: int, nv: int) -> int: ...  # noqa: D102
    def ssm_replay_ring_bytes(  # noqa: D102
        self, num_ssm_layers: int, row_bytes: int, k_ceiling: int, mtp_state_slots: int
    ) -> int: ...
    def require_verify_rollback_supported(  # noqa: D102
        self, mode: rollback.SsmRollbackMode, /
    ) -> None: ...


class ImplementationModuleError(ImportError):
    """An ``--impl-module`` value that does not name a usable implementation."""


@dataclass(frozen=True)
class PythonImplementation:
    """What only an in-process implementation offers: its Python objects.

    ``fresh()`` gives the API with a published mode nobody has written yet;
    ``new_cell`` makes an empty first-write-wins cell, or is None when the
    implementation exposes no cell type; ``import_path`` loads the same
    implementation in another interpreter.
    """

    api: RollbackApi
    import_path: str
    fresh: Callable[[], RollbackApi]
    new_cell: Callable[[], Cell[object]] | None
    #: The ``argparse_mode`` module beside the implementation's, when there is one.
    argparse_mode: types.ModuleType | None = None

    def reproduction(self, expression: str, /) -> str:
        """A command that loads the implementation as ``m`` and prints ``expression``'s value.

        Run from the folder ``check`` ran in; an exception shows as Python's traceback.
        Strings are written as JSON, which Python reads the same, so that the
        command's own quoting stays plain.
        """
        module, _, attribute = self.import_path.partition(":")
        code = f"import importlib; m = importlib.import_module({json.dumps(module)})"
        if attribute:
            code += (
                f"; m = getattr(m, {json.dumps(attribute)}); m = m() if isinstance(m, type) else m"
            )
        return f"python -c {shlex.quote(f'{code}; print(repr({expression}))')}"


def fresh_module(name: str, /) -> types.ModuleType:
    """A new copy of module ``name``, executed anew and not registered in ``sys.modules``.

    Its module-level state, the published mode among it, starts unwritten;
    the modules it imports are shared with the copy already loaded.

    Raises:
        ImplementationModuleError: the module cannot be found or executed.
    """
    found = importlib.util.find_spec(name)
    if found is None or found.loader is None:
        raise ImplementationModuleError(f"cannot find module {name!r}")
    module = importlib.util.module_from_spec(found)
    found.loader.exec_module(module)
    return module


def _where_searched() -> str:
    here = str(Path.cwd())
    first = sys.path[0] if sys.path else ""
    if first in {"", here}:
        return f"(searched the current folder, {here}, then this Python's installed packages)"
    return f"(searched this Python's import path, which does not hold the current folder, {here})"


def _missing(candidate: object, /) -> list[str]:
    return [name for name in REQUIRED_NAMES if not hasattr(candidate, name)]


def load_python_implementation(import_path: str, /) -> PythonImplementation:
    """Load ``MODULE`` or ``MODULE:ATTR`` as an implementation.

    A module gets a fresh published mode by being executed anew; a class by
    being instantiated; any other object by being looked up in a fresh copy
    of its module.

    Raises:
        ImplementationModuleError: the path is malformed, cannot be imported,
            names no attribute, or lacks one of :data:`REQUIRED_NAMES`.
    """
    module_name, colon, attribute = import_path.partition(":")
    if not module_name or (colon and not attribute) or ":" in attribute:
        raise ImplementationModuleError(f"{import_path!r} is not MODULE or MODULE:ATTR")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        raise ImplementationModuleError(
            f"cannot import {module_name}: {type(error).__name__}: {error} {_where_searched()}"
        ) from None
    except Exception as error:  # noqa: BLE001 - any import failure is the user's to see
        raise ImplementationModuleError(
            f"cannot import {module_name}: {type(error).__name__}: {error}"
        ) from None
    fresh: Callable[[], object]
    if not attribute:
        candidate: object = module

        def fresh() -> object:
            return fresh_module(module_name)
    else:
        if not hasattr(module, attribute):
            raise ImplementationModuleError(f"module {module_name} has no attribute {attribute!r}")
        found = getattr(module, attribute)
        if isinstance(found, type):
            candidate, fresh = found(), found
        else:
            candidate = found

            def fresh() -> object:
                return getattr(fresh_module(module_name), attribute)

    missing = _missing(candidate)
    if missing:
        raise ImplementationModuleError(
            f"{import_path} lacks {', '.join(missing)} (the public names of {REFERENCE})"
        )
    api: RollbackApi = candidate  # type: ignore[assignment]
    new_cell = getattr(candidate, CELL_NAME, None)
    return PythonImplementation(
        api=api,
        import_path=import_path,
        fresh=fresh,  # type: ignore[arg-type]
        new_cell=new_cell,
        argparse_mode=_argparse_mode_beside(module_name),
    )


#: The module beside a vendored ``rollback`` that adds the command-line option.
ARGPARSE_MODULE: Final = "argparse_mode"


def _argparse_mode_beside(module_name: str, /) -> types.ModuleType | None:
    package = module_name.rpartition(".")[0]
    if not package:
        return None
    sibling = f"{package}.{ARGPARSE_MODULE}"
    # The package itself imported with the module, so looking in it cannot fail.
    if importlib.util.find_spec(sibling) is None:
        return None
    try:
        return importlib.import_module(sibling)
    except Exception as error:  # noqa: BLE001 - any import failure is the user's to see
        raise ImplementationModuleError(
            f"cannot import {sibling}, beside {module_name}: {type(error).__name__}: {error}"
        ) from None
