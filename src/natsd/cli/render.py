"""Human output: aligned ``Label: value`` sections and rich tables (no network code here).

The layout follows the ``nats`` tool as the project's seeds show it::

    Information for Stream ORDERS created 2026-11-21 09:00:00 UTC

    Configuration:

                 Subjects: ORDERS.*
         Acknowledgements: true
    ...
"""

from __future__ import annotations

import io
import sys
from typing import Any, Iterable, Sequence

from rich.console import Console
from rich.table import Table

from natsd.cli.common import comma, format_duration, format_time, human_bytes, limit

Rows = Sequence[tuple[str, Any]]


def sections(title: str, parts: Sequence[tuple[str, Rows]]) -> str:
    """A title line, then each ``(heading, rows)`` section with labels right-aligned across the whole block."""
    width = max((len(k) for _, rows in parts for k, _ in rows), default=0)
    out = [title, ""]
    for heading, rows in parts:
        if not rows:
            continue
        out.append(f"{heading}:")
        out.append("")
        for k, v in rows:
            out.append(f"{k.rjust(width + 2)}: {v}")
        out.append("")
    return "\n".join(out)


def table(
    title: str | None, headers: Sequence[str], rows: Iterable[Sequence[Any]], footer: Sequence[Any] | None = None
) -> str:
    """A rich table rendered to text (plain when stdout is not a terminal); ``footer``: a totals row under a rule."""
    t = Table(title=title, show_lines=False, header_style="bold", title_justify="left", show_footer=footer is not None)
    for i, h in enumerate(headers):
        t.add_column(h, overflow="fold", footer=str(footer[i]) if footer is not None else "")
    for r in rows:
        t.add_row(*[str(c) for c in r])
    return render(t)


def render(renderable: Any) -> str:
    buf = io.StringIO()
    try:
        tty = sys.stdout.isatty()
    except (AttributeError, ValueError):
        tty = False
    Console(
        file=buf,
        force_terminal=tty,
        width=120 if not tty else None,
        highlight=False,
        color_system="auto" if tty else None,
    ).print(renderable)
    return buf.getvalue().rstrip("\n")


# ---------------------------------------------------------------------------------------------------------------
# Streams
# ---------------------------------------------------------------------------------------------------------------

_STORAGE = {"file": "File", "memory": "Memory"}
_RETENTION = {"limits": "Limits", "interest": "Interest", "workqueue": "WorkQueue"}


def stream_config_rows(cfg: dict) -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = []
    if cfg.get("description"):
        rows.append(("Description", cfg["description"]))
    if cfg.get("subjects"):
        rows.append(("Subjects", ", ".join(cfg["subjects"])))
    rows.append(("Acknowledgements", str(not cfg.get("no_ack", False)).lower()))
    rows.append(
        (
            "Retention",
            f"{_STORAGE.get(cfg.get('storage', 'file'), cfg.get('storage'))} - "
            f"{_RETENTION.get(cfg.get('retention', 'limits'), cfg.get('retention'))}",
        )
    )
    rows.append(("Replicas", cfg.get("num_replicas", 1)))
    rows.append(("Discard Policy", str(cfg.get("discard", "old")).capitalize()))
    rows.append(("Duplicate Window", format_duration(cfg.get("duplicate_window", 0))))
    if cfg.get("sealed"):
        rows.append(("Sealed", "true"))
    if cfg.get("deny_delete"):
        rows.append(("Allows Msg Delete", "false"))
    if cfg.get("deny_purge"):
        rows.append(("Allows Purge", "false"))
    if cfg.get("allow_rollup_hdrs"):
        rows.append(("Allows Rollups", "true"))
    if cfg.get("allow_direct"):
        rows.append(("Allows Direct", "true"))
    rows.append(("Maximum Messages", limit(cfg.get("max_msgs", -1))))
    if cfg.get("max_msgs_per_subject", -1) not in (-1, 0, None):
        rows.append(("Maximum Per Subject", limit(cfg.get("max_msgs_per_subject"))))
    rows.append(("Maximum Bytes", limit(cfg.get("max_bytes", -1), human_bytes)))
    age = cfg.get("max_age", 0)
    rows.append(("Maximum Age", format_duration(age) if age else "unlimited"))
    rows.append(("Maximum Message Size", limit(cfg.get("max_msg_size", -1), human_bytes)))
    rows.append(("Maximum Consumers", limit(cfg.get("max_consumers", -1))))
    if cfg.get("template_owner"):
        rows.append(("Template Owner", cfg["template_owner"]))
    if cfg.get("mirror"):
        rows.append(("Mirror", cfg["mirror"].get("name")))
    for src in cfg.get("sources") or []:
        rows.append(("Source", src.get("name")))
    return rows


def stream_state_rows(state: dict) -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = [
        ("Messages", comma(state.get("messages", 0))),
        ("Bytes", human_bytes(state.get("bytes", 0))),
        ("FirstSeq", comma(state.get("first_seq", 0))),
        ("LastSeq", comma(state.get("last_seq", 0))),
    ]
    if state.get("num_deleted"):
        rows.append(("Deleted Messages", comma(state["num_deleted"])))
    lost = state.get("lost") or {}
    if lost.get("msgs"):
        # LostStreamData: sequences the server found damaged on recovery, and their bytes.
        rows.append(("Lost Messages", f"{comma(len(lost['msgs']))} ({human_bytes(lost.get('bytes', 0))})"))
    if state.get("num_subjects"):
        rows.append(("Number of Subjects", comma(state["num_subjects"])))
    rows.append(("Active Consumers", comma(state.get("consumer_count", 0))))
    return rows


def stream_info(info: dict) -> str:
    cfg = info.get("config", {})
    title = f"Information for Stream {cfg.get('name')}"
    if info.get("created"):
        title += f" created {format_time(info['created'])}"
    return sections(
        title, [("Configuration", stream_config_rows(cfg)), ("State", stream_state_rows(info.get("state", {})))]
    )


# ---------------------------------------------------------------------------------------------------------------
# Consumers
# ---------------------------------------------------------------------------------------------------------------


def consumer_config_rows(cfg: dict) -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = []
    if cfg.get("durable_name"):
        rows.append(("Durable Name", cfg["durable_name"]))
    elif cfg.get("name"):
        rows.append(("Name", cfg["name"]))
    if cfg.get("description"):
        rows.append(("Description", cfg["description"]))
    if cfg.get("deliver_subject"):
        rows.append(("Delivery Subject", cfg["deliver_subject"]))
    else:
        rows.append(("Pull Mode", "true"))
    if cfg.get("filter_subject"):
        rows.append(("Filter Subject", cfg["filter_subject"]))
    for f in cfg.get("filter_subjects") or []:
        rows.append(("Filter Subject", f))
    policy = cfg.get("deliver_policy", "all")
    rows.append(("Deliver All", str(policy == "all").lower()))
    rows.append(("Deliver Last", str(policy == "last").lower()))
    if policy not in ("all", "last"):
        rows.append(("Deliver Policy", policy))
    if cfg.get("opt_start_seq"):
        rows.append(("Start Sequence", comma(cfg["opt_start_seq"])))
    if cfg.get("opt_start_time"):
        rows.append(("Start Time", format_time(cfg["opt_start_time"])))
    rows.append(("Ack Policy", cfg.get("ack_policy", "none")))
    if cfg.get("ack_policy", "none") != "none":
        rows.append(("Ack Wait", format_duration(cfg.get("ack_wait", 0))))
    rows.append(("Replay Policy", cfg.get("replay_policy", "instant")))
    if cfg.get("max_deliver", -1) not in (-1, 0, None):
        rows.append(("Maximum Deliveries", cfg["max_deliver"]))
    if cfg.get("sample_freq"):
        rows.append(("Sampling Rate", str(cfg["sample_freq"]).rstrip("%")))
    if cfg.get("max_ack_pending"):
        rows.append(("Max Ack Pending", comma(cfg["max_ack_pending"])))
    if cfg.get("max_waiting") and not cfg.get("deliver_subject"):
        rows.append(("Max Waiting Pulls", comma(cfg["max_waiting"])))
    if cfg.get("idle_heartbeat"):
        rows.append(("Idle Heartbeat", format_duration(cfg["idle_heartbeat"])))
    if cfg.get("flow_control"):
        rows.append(("Flow Control", "true"))
    if cfg.get("deliver_group"):
        rows.append(("Deliver Queue Group", cfg["deliver_group"]))
    if cfg.get("inactive_threshold"):
        rows.append(("Inactive Threshold", format_duration(cfg["inactive_threshold"])))
    return rows


def consumer_state_rows(info: dict) -> list[tuple[str, Any]]:
    d = info.get("delivered") or {}
    a = info.get("ack_floor") or {}
    return [
        (
            "Last Delivered Message",
            f"Consumer sequence: {comma(d.get('consumer_seq'))} Stream sequence: {comma(d.get('stream_seq'))}",
        ),
        (
            "Acknowledgment floor",
            f"Consumer sequence: {comma(a.get('consumer_seq'))} Stream sequence: {comma(a.get('stream_seq'))}",
        ),
        ("Pending Messages", comma(info.get("num_ack_pending", 0))),
        ("Redelivered Messages", comma(info.get("num_redelivered", 0))),
        ("Unprocessed Messages", comma(info.get("num_pending", 0))),
        ("Waiting Pulls", comma(info.get("num_waiting", 0))),
    ]


def consumer_info(info: dict) -> str:
    title = f"Information for Consumer {info.get('stream_name')} > {info.get('name')}"
    if info.get("created"):
        title += f" created {format_time(info['created'])}"
    return sections(
        title, [("Configuration", consumer_config_rows(info.get("config", {}))), ("State", consumer_state_rows(info))]
    )


# ---------------------------------------------------------------------------------------------------------------
# Account
# ---------------------------------------------------------------------------------------------------------------


def account_info(info: dict) -> str:
    lim = info.get("limits") or {}

    def of(used: int, lim_v: int | None, fmt=comma) -> str:
        return f"{fmt(used)} of {'Unlimited' if lim_v is None or lim_v < 0 else fmt(lim_v)}"

    api = info.get("api") or {}
    rows = [
        ("Memory", of(info.get("memory", 0), lim.get("max_memory"), human_bytes)),
        ("Storage", of(info.get("storage", 0), lim.get("max_storage"), human_bytes)),
        ("Streams", of(info.get("streams", 0), lim.get("max_streams"))),
        ("Consumers", of(info.get("consumers", 0), lim.get("max_consumers"))),
    ]
    if info.get("domain"):
        rows.append(("Domain", info["domain"]))
    api_rows = [
        ("API Level", api.get("level", 0)),
        ("API Requests", comma(api.get("total", 0))),
        ("API Errors", comma(api.get("errors", 0))),
    ]
    return sections("Account Information", [("JetStream Account Information", rows), ("API", api_rows)])
