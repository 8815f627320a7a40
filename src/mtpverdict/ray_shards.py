"""Deprecated path of collect/ray_shards.py: `from mtpverdict.collect.ray_shards import run_shards`.

docs/scale-out.md documented `from mtpverdict.ray_shards import run_shards` before the Ray shards moved
into collect/; this module keeps that import working, each name with a DeprecationWarning naming the new
path, raised where the name is imported (so Python shows it to a script by default).
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what a type checker sees of the names; at run time each comes through __getattr__
    from mtpverdict.collect.ray_shards import ShardRun, run_shards

__all__ = ["ShardRun", "run_shards"]


def __getattr__(name: str) -> Any:
    """A moved name from mtpverdict.collect.ray_shards, with its DeprecationWarning."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"mtpverdict.ray_shards is deprecated: import {name} from mtpverdict.collect.ray_shards",
        DeprecationWarning,
        stacklevel=2,
    )
    from mtpverdict.collect import ray_shards

    return getattr(ray_shards, name)
