"""bench/run_wide.py without servers: argument parsing, the generator's result line, CPU sampling and the
median/ratio summary (the bench itself is never run by the suite; figures live in bench/, not in tests)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def wide():
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("run_wide", BENCH / "run_wide.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(str(BENCH))


def test_defaults_cover_every_workload_of_issue_15(wide):
    args = wide.parse_args([])
    assert args.workloads == [
        "replay",
        "pub8streams",
        "queue4",
        "subjects",
        "subjectsreply",
        "reqrep",
        "pub8",
        "jspub16k",
        "consumers",
        "latency",
    ]
    assert args.runs == 1
    assert wide.count_for(args, "replay") == 200_000
    assert wide.WORKLOADS["jspub16k"][:3] == ("jspub", 10_000, 16384)


def test_subset_scale_and_overrides(wide):
    args = wide.parse_args(["--runs", "3", "--scale", "0.5", "queue4", "latency", "--load-rate", "1000"])
    assert args.workloads == ["queue4", "latency"]
    assert args.runs == 3 and args.load_rate == 1000.0
    assert wide.count_for(args, "queue4") == 200_000
    assert wide.count_for(wide.parse_args(["--n", "77"]), "consumers") == 77


@pytest.mark.parametrize("argv", [["nosuch"], ["--runs", "0"]])
def test_bad_arguments_are_refused(wide, argv, capsys):
    with pytest.raises(SystemExit) as e:
        wide.parse_args(argv)
    assert e.value.code == 2
    assert "error" in capsys.readouterr().err


def test_parse_result_takes_the_last_result_line(wide):
    lines = [
        "mark start",
        "noise",
        "mark end",
        "workload=latency n=4000 size=128 rr_p50_us=210.6 rr_p99_us=1594.8 js_p999_us=4536.6 "
        "bg_rate=366635 msgs=459965 rate=3216",
    ]
    res = wide.parse_result(lines)
    assert res["workload"] == "latency"
    assert res["n"] == 4000.0 and res["rr_p99_us"] == 1594.8 and res["msgs"] == 459965.0
    with pytest.raises(ValueError):
        wide.parse_result(["mark start", "widebench: failed"])


def test_cpu_per_message_uses_msgs_when_given(wide):
    assert wide.cpu_us_per_msg({"n": 200_000.0, "cpu_s": 1.0}) == pytest.approx(5.0)
    assert wide.cpu_us_per_msg({"n": 4000.0, "msgs": 500_000.0, "cpu_s": 1.0}) == pytest.approx(2.0)
    assert wide.cpu_us_per_msg({"n": 10.0}) is None
    assert wide.cpu_us_per_msg(None) is None


def test_proc_cpu_seconds_reads_this_process(wide):
    t = os.times()
    got = wide.proc_cpu_seconds(os.getpid())
    # /proc counts in clock ticks; os.times() reads the same counters at a finer grain
    assert abs(got - (t.user + t.system)) < 0.5


def test_summary_medians_and_ratio_direction(wide):
    def r(rate, p99, cpu):
        return {"n": 1000.0, "rate": rate, "p99_us": p99, "cpu_s": cpu}

    runs = {
        "reqrep": {
            "natsd": [r(100, 300, 0.010), r(300, 100, 0.030), r(200, 200, 0.020)],
            "nats-server": [r(400, 100, 0.010), None, r(400, 100, 0.010)],
        }
    }
    rows = {row["figure"]: row for row in wide.summarise(runs)}
    rate, p99 = rows["req/s"], rows["p99 µs"]
    assert rate["natsd"] == 200 and rate["nats-server"] == 400
    assert rate["ratio"] == pytest.approx(0.5)  # rates: natsd / nats-server
    assert p99["natsd"] == 200 and p99["nats-server"] == 100
    assert p99["ratio"] == pytest.approx(0.5)  # latencies: nats-server / natsd, below 1 = natsd behind
    assert rate["natsd_cpu_us_per_msg"] == pytest.approx(20.0)
    assert rate["nats-server_cpu_us_per_msg"] == pytest.approx(10.0)
    assert rate["runs"] == 3
    assert rate["run_ratios"] == pytest.approx([0.25, 0.5])  # the run without a nats-server figure is left out
    assert p99["run_ratios"] == pytest.approx([1 / 3, 0.5])
    assert "0.50" in wide.format_rows(list(rows.values()))


def test_failed_runs_show_as_fail(wide):
    rows = wide.summarise({"consumers": {"natsd": [None], "nats-server": [{"n": 5.0, "rate": 9.0}]}})
    assert rows[0]["ratio"] is None and rows[0]["runs"] == 0
    assert "fail" in wide.format_rows(rows)
