"""``natsctl``: a command-line client for NATS and JetStream, built on nats-py only.

It works against natsd and the reference nats-server alike, following the reference ``nats`` tool's verbs
and flags::

    natsctl stream add ORDERS --subjects "ORDERS.*" --max-age 1y --storage file
    natsctl consumer add ORDERS NEW --filter ORDERS.received --ack explicit --pull --deliver all
    natsctl pub ORDERS.received "order {{Count}}" --count 10 --wait
    natsctl consumer next ORDERS NEW
    natsctl stream backup ORDERS /backups/ORDERS && natsctl -s nats://other:4222 stream restore /backups/ORDERS

Modules: ``main`` (argument parsing, exit codes), ``common`` (errors, value parsing, prompts, the raw
``$JS.API`` client), ``render`` (human output), and one module per verb group: ``streams``,
``consumers``, ``pubsub``, ``account`` (account info, server check), ``backup`` (snapshots and account
backups), ``kv``, ``objects``, ``bench``, ``views`` (stream view/subjects/seal, consumer report, events,
server info/ls) and ``contexts`` (the nats CLI's context files).

Exit codes: 0 success, 1 server/API error, 2 usage error, 130 interrupted (see ``natsctl --help``).
"""

__all__: list[str] = []
