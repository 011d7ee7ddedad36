# SPDX-License-Identifier: MIT OR Apache-2.0
"""The module view: this package's engine-neutral layout, ``k`` full states per slot."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ..dtypes import Dtype, StateDtypes
from ..state import SnapshotSizing
from ..unit import EngineUnit, layer_bytes

if TYPE_CHECKING:
    from ..state import Drafting, Model, Setup

__all__ = ["MODULE", "MODULE_ENGINE", "ModuleView"]

#: How outputs name the module view's source.
MODULE_ENGINE: Final = "this module (engine-neutral, spec/rollback.py)"


class ModuleView(EngineUnit):
    """Engine-neutral: base h + (K-1)c per slot; speculative k (h + (K-1)c), the dense layout."""

    name = "module"
    engine = MODULE_ENGINE
    plot_label = "dense snapshot (k full states, engine-neutral)"
    base_formula = "(h + (K-1) conv columns)"
    speculative_formula = "k x (h + (K-1) conv columns), the dense layout"
    seed_slots = True
    pads_pools = False

    def describe(self, setup: Setup, /) -> str:
        """The dense layout over the module's slots."""
        del setup
        return "k full states per slot (the dense layout), slots as the module counts them"

    def dtypes(self, model: Model, setup: Setup, /) -> StateDtypes:
        """FP32 h and BF16 conv, as the module stores them, unless ``setup`` forces others."""
        del model
        return StateDtypes(recurrent=setup.recurrent or Dtype.FP32, conv=setup.conv or Dtype.BF16)

    def size(self, model: Model, setup: Setup, drafting: Drafting, /) -> SnapshotSizing:
        """The requests are the module's slots, ``num_intermediates`` its k (default s + 1)."""
        d = model.dimensions
        dtypes = self.dtypes(model, setup)
        h, column = layer_bytes(d, dtypes)
        state = h + (d.conv_kernel - 1) * column
        k = drafting.num_intermediates
        if k is None:
            k = drafting.num_drafts + 1
        return SnapshotSizing(
            view=self.name,
            engine=self.engine,
            setup=self.describe(setup),
            dtypes=dtypes,
            requests=drafting.requests,
            base_bytes_per_request=d.num_gdn_layers * state,
            # No drafts, nothing to roll back: the pool holds no intermediate states.
            speculative_bytes_per_request=d.num_gdn_layers * k * state
            if drafting.num_drafts
            else 0,
            recurrent_bytes_per_layer=h,
            conv_column_bytes_per_layer=column,
        )


#: The unit.
MODULE: Final = ModuleView()
