"""The kill -9 campaign (tests/engine/kill_campaign.py) in the default suite: a short slice of
cycles must find no loss, and a child that acknowledges before it writes must be caught
(the checker bites). `make test-long` (KUDUSQL_LONG=1) runs 1,000 cycles."""

from __future__ import annotations

import os
import random

import pytest

from tests.engine.kill_campaign import Loss, run_campaign

LONG = os.environ.get("KUDUSQL_LONG") == "1"


def _seed() -> int:
    s = os.environ.get("KUDUSQL_KILL_SEED")
    return int(s) if s else random.randrange(1 << 30)


def test_kill_campaign_slice(tmp_path):
    seed = _seed()
    r = run_campaign(12, seed, str(tmp_path), log=lambda s: None)
    assert r["losses"] == 0 and r["acked_steps"] > 0, seed


def test_kill_campaign_catches_an_early_acknowledgement(tmp_path, monkeypatch):
    monkeypatch.setenv("KUDUSQL_KILL_BREAK", "ack-early")
    with pytest.raises(Loss, match="acknowledged state"):
        run_campaign(15, 7, str(tmp_path), log=lambda s: None)


@pytest.mark.long
@pytest.mark.skipif(not LONG, reason="set KUDUSQL_LONG=1 for 1,000 kill -9 cycles")
def test_kill_campaign_long(tmp_path):
    seed = _seed()
    r = run_campaign(1000, seed, str(tmp_path), log=print)
    assert r["losses"] == 0, seed
