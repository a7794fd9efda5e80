"""/metrics text: the exporter's flattening of /varz, and label text reuse (no sockets)."""

from __future__ import annotations

import asyncio

from prometheus_client.parser import text_string_to_metric_families


def test_varz_flattening_follows_the_exporter():
    from natsd.server.monitoring.metrics import varz_families

    fams = {
        f.name: f
        for f in varz_families(
            {
                "server_id": "S",
                "version": "2.11.0",
                "now": "2026-01-01T00:00:00Z",
                "host": "0.0.0.0",
                "in_msgs": 3,
                "auth_required": True,
                "leaf": {"port": 1},
                "cluster": {"tls_timeout": 2, "urls": ["x"]},
                "jetstream": {"stats": {"api": {"total": 4}}},
                "config_load_time": "2026-01-01T00:00:01.5Z",
            }
        )
    }
    assert fams["gnatsd_varz_in_msgs"].samples[0].value == 3
    assert fams["gnatsd_varz_jetstream_stats_api_total"].samples[0].value == 4
    assert fams["gnatsd_varz_version"].samples[0].labels == {"server_id": "S", "value": "2.11.0"}
    assert fams["gnatsd_varz_config_load_time"].samples[0].value == 1767225601.5
    # booleans, lists, non-label strings ("now", "host") and the exporter's skipped names are left out
    for absent in (
        "gnatsd_varz_auth_required",
        "gnatsd_varz_now",
        "gnatsd_varz_host",
        "gnatsd_varz_leaf_port",
        "gnatsd_varz_cluster_tls_timeout",
        "gnatsd_varz_cluster_urls",
    ):
        assert absent not in fams


def test_label_cache_renders_like_prometheus_client_and_forgets_deleted_rows():
    from natsd.server.monitoring.metrics import LabelCache, _Slicer, _table_text

    cache = LabelCache()
    names = ["stream_name", "consumer_desc"]
    rows = [("S1", 'quote " and \\ backslash\nnewline'), ("S2", "plain")]

    async def once(rs, vals):
        return "".join(
            p.decode()
            for p in await _table_text(
                names, [("num_pending", "help")], "jetstream_consumer", rs, vals, cache, _Slicer()
            )
        )

    text = asyncio.run(once(rows, [[3, None]]))  # one column per metric
    fams = list(text_string_to_metric_families(text))
    assert [f.name for f in fams] == ["jetstream_consumer_num_pending"]
    (sample,) = fams[0].samples  # None: not reported
    assert sample.labels == {"stream_name": "S1", "consumer_desc": 'quote " and \\ backslash\nnewline'}
    assert sample.value == 3
    cache.end_scrape()
    asyncio.run(once(rows[1:], [[1]]))
    cache.end_scrape()
    assert list(cache._text) == [rows[1]]  # S1 is gone from the scrape, so from the cache


def test_fast_number_and_time_paths_agree_with_the_general_ones():
    from prometheus_client.utils import floatToGoString

    from natsd.gotime import parse_rfc3339
    from natsd.server.monitoring.metrics import _go_float, _unix_seconds

    for v in (
        0,
        1,
        -1,
        7,
        999_999,
        1_000_000,
        12_345_678,
        -5_000_000,
        10**15 - 1,
        -(10**15) + 1,
        10**15,
        10**16,
        2**63,
        1.5,
        -0.25,
        1e20,
        float("inf"),
    ):
        assert _go_float(v) == floatToGoString(v), v
    for t in (
        "2026-11-24T15:40:08.399566464Z",
        "2026-11-24T15:40:08Z",
        "2026-11-24T15:40:08.5Z",
        "2026-11-24T15:40:09.000000001Z",
        "1970-01-01T00:00:00Z",
    ):
        want = parse_rfc3339(t) / 1e9
        assert abs(_unix_seconds(t) - want) < 1e-6, t  # first: the general parser
        assert abs(_unix_seconds(t) - want) < 1e-6, t  # then: the cached second and the fraction
    assert _unix_seconds("2026-11-24T15:40:08.x9Z") is None and _unix_seconds("not a time") is None
