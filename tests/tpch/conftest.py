"""Shared TPC-H fixtures: the parquet data, generated once per test session."""

from __future__ import annotations

import os

import pytest

from tpch.data import generate

# SF 0.02: ~120k lineitem rows; every query returns rows and Q17 and Q8 give non-trivial
# answers (at SF 0.01 Q17 is one NULL row and Q8's market shares are 0.0).
TEST_SF = float(os.environ.get("KUDUSQL_TPCH_SF", "0.02"))


@pytest.fixture(scope="session")
def tpch_parquet(tmp_path_factory) -> str:
    """A directory with the eight TPC-H tables as parquet at TEST_SF."""
    out = str(tmp_path_factory.mktemp(f"tpch-sf{TEST_SF:g}"))
    generate(TEST_SF, out)
    return out
