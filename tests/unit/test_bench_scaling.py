"""bench/bench_scaling.py without servers: arguments and sizes per axis, the C client's result line, medians
and the ratio direction, the markdown table and the README block it replaces (the servers are driven by
tests/acceptance/test_bench_scaling_smoke.py's smoke run; figures live in bench/README.md, not in tests)."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def scaling():
    spec = importlib.util.spec_from_file_location("bench_scaling", BENCH / "bench_scaling.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_scaling"] = mod  # dataclass-free, but argparse and typing look modules up by name
    try:
        spec.loader.exec_module(mod)
        yield mod
    finally:
        sys.modules.pop("bench_scaling", None)


def test_default_sizes_are_ten_fold_steps_per_axis(scaling):
    args = scaling.parse_args([])
    assert args.axes == ["messages", "subjects", "streams", "consumers", "connections", "bytes"]
    assert args.runs == 3
    assert scaling.sizes_for("messages", args.tops, False) == [10_000, 100_000, 1_000_000]
    assert scaling.sizes_for("subjects", args.tops, False) == [100, 1000, 10_000, 100_000]
    assert scaling.sizes_for("streams", args.tops, False) == [1, 10, 100, 1000]
    assert scaling.sizes_for("connections", args.tops, False) == [1, 10, 100, 1000]
    assert (args.bytes_msgs, args.bytes_subjects) == (2_000_000, 1_000_000)


def test_max_exp_per_axis_and_for_all(scaling):
    args = scaling.parse_args(["--axis", "messages,streams", "--max-exp", "messages=7", "--max-exp", "streams=4"])
    assert args.axes == ["messages", "streams"]
    assert scaling.sizes_for("messages", args.tops, False)[-1] == 10_000_000
    assert scaling.sizes_for("streams", args.tops, False) == [1, 10, 100, 1000, 10_000]
    every = scaling.parse_args(["--max-exp", "2"]).tops
    assert scaling.sizes_for("consumers", every, False) == [1, 10, 100]
    # below the axis's smallest size, the top alone
    assert scaling.sizes_for("messages", every, False) == [100]


def test_quick_is_small_and_one_run(scaling):
    args = scaling.parse_args(["--quick"])
    assert args.runs == 1
    assert all(max(scaling.sizes_for(a, args.tops, True)) <= 100_000 for a in scaling.AXES)
    assert args.bytes_msgs < 100_000 and args.bytes_subjects < 100_000
    # an explicit --max-exp wins over --quick's sizes
    assert scaling.sizes_for("streams", scaling.parse_max_exp(["streams=2"]), True) == [1, 10, 100]


@pytest.mark.parametrize("argv", [["--axis", "nosuch"], ["--runs", "0"], ["--max-exp", "nosuch=3"], ["--max-exp", "x"]])
def test_bad_arguments_are_refused(scaling, argv, capsys):
    with pytest.raises(SystemExit) as e:
        scaling.parse_args(argv)
    assert e.value.code == 2
    assert "error" in capsys.readouterr().err


def test_parse_result_takes_the_result_line(scaling):
    res = scaling.parse_result(["mark start", "mark end", "result n=100 rate=5000.5 p50_us=10.0 p99_us=99.5"])
    assert res == {"n": 100.0, "rate": 5000.5, "p50_us": 10.0, "p99_us": 99.5}
    with pytest.raises(ValueError):
        scaling.parse_result(["scalebench: failed"])


def test_ratio_below_one_means_natsd_behind(scaling):
    assert scaling.ratio(50.0, 100.0, True) == pytest.approx(0.5)  # a rate half of nats-server's
    assert scaling.ratio(2.0, 1.0, False) == pytest.approx(0.5)  # a time twice nats-server's
    assert scaling.ratio(None, 1.0, True) is None and scaling.ratio(1.0, 0.0, False) is None


def test_summary_medians_keep_each_figures_sizes_together(scaling):
    def r(rate, rss):
        return {"pub_rate": rate, "rss_mb": rss}

    runs = {
        "messages": {
            "10000": {"natsd": [r(100, 30), r(300, 40), r(200, 50)], "nats-server": [r(400, 20), r(400, 20)]},
            "100000": {"natsd": [r(90, 60)], "nats-server": [r(300, 30)]},
        }
    }
    rows = scaling.summarise(runs)
    assert [(x["key"], x["size"]) for x in rows] == [
        ("pub_rate", "10000"),
        ("pub_rate", "100000"),
        ("rss_mb", "10000"),
        ("rss_mb", "100000"),
    ]
    first = rows[0]
    assert first["natsd"] == 200 and first["nats-server"] == 400 and first["ratio"] == pytest.approx(0.5)
    assert first["runs"] == 3
    assert rows[3]["ratio"] == pytest.approx(0.5)  # RSS 60 MB against 30 MB
    table = scaling.markdown(rows)
    lines = table.splitlines()
    assert lines[0].startswith("| axis | size | figure | natsd | nats-server | ratio |")
    assert len(lines) == 2 + len(rows)
    assert "| messages | 100k | publish msgs/s (async, acked) | 90.0 | 300 | 0.30 |" in lines


def test_one_server_only_gives_no_ratio(scaling):
    rows = scaling.summarise({"streams": {"10": {"natsd": [{"create_s": 0.5}]}}})
    assert rows[0]["nats-server"] is None and rows[0]["ratio"] is None
    assert scaling.markdown(rows).splitlines()[-1].endswith("| – | – |")


def test_size_labels(scaling):
    assert [scaling.size_label("m", s) for s in ("1", "100", "10000", "2000000", "1500")] == [
        "1",
        "100",
        "10k",
        "2M",
        "1.5k",
    ]
    assert scaling.size_label("bytes", "2000000,1000000", "msg_bytes") == "2M"
    assert scaling.size_label("bytes", "2000000,1000000", "subj_bytes_restart") == "1M"


def test_readme_block_is_replaced_or_appended(scaling):
    begin, end = scaling.BEGIN, scaling.END
    text = f"# Benchmarks\n\nbefore\n{begin}\nold table\n{end}\nafter\n"
    new = scaling.replace_block(text, "new table")
    assert new == f"# Benchmarks\n\nbefore\n{begin}\nnew table\n{end}\nafter\n"
    assert scaling.replace_block(new, "newer") == new.replace("new table", "newer")
    appended = scaling.replace_block("# Benchmarks\n", "t")
    assert appended == f"# Benchmarks\n\n{begin}\nt\n{end}\n"


def test_proc_readers_read_this_process(scaling):
    t = os.times()
    assert abs(scaling.proc_cpu_s(os.getpid()) - (t.user + t.system)) < 0.5
    assert scaling.proc_rss_mb(os.getpid()) > 1


def test_bytes_per_item_only_at_the_axis_largest_size(scaling):
    def r(rss, per):
        return {"rss_mb": rss, "bytes_per": per}

    runs = {"streams": {s: {"natsd": [r(30.0, 900.0)], "nats-server": [r(20.0, 5e6)]} for s in ("1", "10", "100")}}
    rows = scaling.summarise(runs)
    assert [x["size"] for x in rows if x["key"] == "rss_mb"] == ["1", "10", "100"]
    assert [x["size"] for x in rows if x["key"] == "bytes_per"] == ["100"]
    both = {"bytes": {"2000000,1000000": {"natsd": [{"msg_bytes": 30.0}], "nats-server": [{"msg_bytes": 15.0}]}}}
    assert scaling.summarise(both)[0]["ratio"] == pytest.approx(0.5)


def test_a_saved_run_renders_again_without_measuring(scaling, tmp_path, capsys):
    header = {"command": "python bench/bench_scaling.py --axis streams", "date": "D", "note": "quiet", "runs": 1}
    header["minutes"] = 0.5
    runs = {"streams": {"10": {"natsd": [{"create_s": 0.2}], "nats-server": [{"create_s": 0.1}]}}}
    saved, again = tmp_path / "a.json", tmp_path / "b.json"
    saved.write_text(json.dumps({"header": header, "runs": runs}))
    assert scaling.main(["--from-json", str(saved), "--json", str(again)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("`python bench/bench_scaling.py --axis streams` — D, quiet; medians of 1")
    assert "| streams | 10 | create all s | 0.2 | 0.1 | 0.50 |" in out
    assert json.loads(again.read_text())["header"] == header
