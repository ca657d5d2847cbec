"""The range-splitting store model (``python -m benchmarks.simulate``): what it shows, and its command line."""

from __future__ import annotations

import json

from benchmarks.simulate import main, run


def test_the_model_shows_the_hot_spot_the_spread_and_the_locality():
    outcomes = {o.scheme: o for o in run(rows=60_000, rate=5_000, split_at=2_000, shards=(4, 16))}
    v4, v7 = outcomes["UUIDv4 (random)"], outcomes["UUIDv7 (time first)"]
    k4, k16 = outcomes["seqid sharded, k=4"], outcomes["seqid sharded, k=16"]
    assert v7.hottest_share > 0.95 and v7.sequential > 0.95  # one hot range, perfectly ordered
    assert v4.hottest_share < 0.1 and v4.sequential < 0.05  # spread out, no locality
    for k, o in ((4, k4), (16, k16)):
        assert o.hottest_share < 1.6 / k and o.sequential > 0.95  # spread over k ranges, still ordered
    assert k16.ranges_written_per_s > k4.ranges_written_per_s > v7.ranges_written_per_s


def test_the_cli_prints_the_table_and_json(capsys):
    assert main(["--rows", "20000", "--rate", "2000", "--split-at", "1000", "--shards", "8"]) == 0
    text = capsys.readouterr().out
    assert "| seqid sharded, k=8 |" in text and "UUIDv7 (time first)" in text
    assert main(["--rows", "20000", "--rate", "2000", "--split-at", "1000", "--json"]) == 0
    assert {o["scheme"] for o in json.loads(capsys.readouterr().out)} >= {"UUIDv4 (random)", "seqid sharded, k=16"}
