"""Each cost test starts from the bundled table and no budget, and leaves them so."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from otel_agentdiag.cost import bundled_table, install_budget, install_table


@pytest.fixture(autouse=True)
def _bundled_prices_and_no_budget() -> Iterator[None]:
    install_table(bundled_table())
    install_budget(None)
    yield
    install_table(bundled_table())
    install_budget(None)
