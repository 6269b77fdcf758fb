"""``python -m bench``'s table on made-up rows (ratios, targets, failures, n/a), and its row
registry: every measurement fills rows that exist, every row is filled by one measurement."""

from __future__ import annotations

from bench._common import pct
from bench._report import (
    BEATS_PEERS,
    NO_FAILURES,
    Report,
    RowSpec,
    at_most,
    floor_ratio,
    floor_ratio_at_least,
)
from bench.run import Settings, measures, parse_args, row_specs


def sample_report() -> Report:
    specs = [
        RowSpec("floor.first", "floor cold start"),
        RowSpec(
            "airlock.first",
            "airlock cold start",
            floor="floor.first",
            peer="first",
            targets=(floor_ratio(1.5), BEATS_PEERS),
        ),
        RowSpec("airlock.call", "round trip", targets=(at_most(3),)),
        RowSpec("airlock.concurrent3", "3 at once", "s", targets=(NO_FAILURES,)),
        RowSpec("warm.claim", "warm claim", targets=(at_most(20),)),
        RowSpec("llm-sandbox.first", "peer cold start", floor="floor.first"),
        RowSpec("swe-rex.first", "peer cold start", floor="floor.first"),
    ]
    r = Report(specs)
    r.add("floor.first", 100.0, 300.0, 200.0)
    r.add("airlock.first", 250.0)
    r.add("airlock.call", 2.0, 4.0, 2.5)
    r.set("airlock.concurrent3", 1.5, "2/3 ok", ["EnvError: boom"])
    r.na("warm.claim", "n/a (no warm pool yet)")
    r.add("llm-sandbox.first", 500.0)
    r.add("swe-rex.first", 125.0)
    return r


def test_percentiles_ratios_and_targets() -> None:
    r = sample_report()
    assert r.p50("floor.first") == 200.0
    assert r.p95("airlock.call") == 4.0
    assert r.ratios("airlock.first") == {"floor": 1.25, "llm-sandbox": 0.5, "swe-rex": 2.0}
    first = r.specs["airlock.first"]
    assert [r.met("airlock.first", t) for t in first.targets] == [True, False]
    assert r.met("airlock.call", at_most(3)) is True
    assert r.met("airlock.concurrent3", NO_FAILURES) is False
    assert r.met("warm.claim", at_most(20)) is None


def test_a_jobs_per_min_row_can_be_held_to_at_least_a_share_of_its_floor() -> None:
    at_least = floor_ratio_at_least(0.8)
    specs = [
        RowSpec("replicas.sqlite1", "one on SQLite", "jobs/min"),
        RowSpec(
            "replicas.pg1", "one on PostgreSQL", "jobs/min", floor="replicas.sqlite1", targets=(at_least,)
        ),
        RowSpec(
            "replicas.pg2", "two on PostgreSQL", "jobs/min", floor="replicas.sqlite1", targets=(at_least,)
        ),
        RowSpec("replicas.pg3", "three", "jobs/min", floor="replicas.sqlite1", targets=(at_least,)),
    ]
    r = Report(specs)
    r.set("replicas.sqlite1", 100.0)
    r.set("replicas.pg1", 79.0)
    r.set("replicas.pg2", 80.0)
    assert [r.met(s.key, at_least) for s in specs[1:]] == [False, True, None]
    text = r.table()
    assert "-- replicas" in text and "≥ 0.8x floor ✗" in text and "≥ 0.8x floor ✓" in text


def test_failures_make_the_run_fail_and_n_a_does_not() -> None:
    assert sample_report().failed() == ["airlock.concurrent3"]


def test_the_table_shows_every_section_value_mark_and_reason() -> None:
    text = sample_report().table()
    for expected in ("-- floor", "-- airlock", "-- warm pool", "-- llm-sandbox", "-- SWE-ReX"):
        assert expected in text
    assert "200 ms" in text and "1.25x" in text and "≤ 1.5x floor ✓" in text and "< peers ✗" in text
    assert "≤ 3 ms ✓" in text and "2.50 ms" in text
    assert "FAILED 1/1: EnvError: boom" in text
    assert "n/a (no warm pool yet)" in text and "≤ 20 ms ?" in text


def test_markdown_has_one_line_per_row_and_json_every_row() -> None:
    r = sample_report()
    lines = r.table(markdown=True).splitlines()
    assert len(lines) == 2 + len(r.specs)
    assert lines[2].startswith("| floor: floor cold start | 200 ms |")
    rows = {row["key"]: row for row in r.as_json()}
    assert rows["warm.claim"]["na"] == "n/a (no warm pool yet)"
    assert rows["airlock.concurrent3"]["errors"] == ["EnvError: boom"]


def test_pct_is_nearest_rank() -> None:
    assert pct([5.0, 1.0, 3.0], 0.5) == 3.0
    assert pct(list(map(float, range(1, 101))), 0.95) == 95.0


def test_every_measurement_fills_existing_rows_and_every_row_is_filled() -> None:
    for argv in ([], ["--quick"]):
        settings = Settings.of(parse_args(argv))
        keys = [s.key for s in row_specs(settings)]
        filled = [k for m in measures(settings) for k in m.keys]
        assert len(keys) == len(set(keys))
        assert sorted(filled) == sorted(keys)


def test_quick_is_small_and_skips_the_peers_unless_asked() -> None:
    quick = Settings.of(parse_args(["--quick"]))
    assert (quick.n, quick.concurrency, quick.peers) == (3, (3,), False)
    assert Settings.of(parse_args(["--quick", "--peers"])).peers
    full = Settings.of(parse_args([]))
    assert (full.n, full.concurrency, full.peers) == (20, (10, 50), True)


def test_the_observability_rows_hold_on_to_off_as_their_floor() -> None:
    from bench import observability_overhead as obs

    report = Report(obs.row_specs(10))
    found = {
        "off": [obs.Batch(200.0, [10.0, 12.0], []), obs.Batch(220.0, [11.0], [])],
        "on": [obs.Batch(180.0, [13.0, 14.0], ["j1: failed"]), obs.Batch(190.0, [12.0], [])],
    }
    obs.record(report, found, obs.Sink(requests=3, bytes=4096))
    assert report.p50("obs.throughput_off") == 210.0 and report.p50("obs.throughput_on") == 185.0
    assert report.data["obs.throughput_on"].errors == ["j1: failed"]
    table = report.table()
    assert "observability" in table and "3 exports, 4 KiB" in table
    assert "0.88x" in table and "✗" in table  # 185/210 misses the 0.95 target
