"""MQTT 3.1.1 clients, served as nats-server serves them (its ``mqtt {}`` block), and MQTT 5.

* :mod:`.listener`: the port (and ``/mqtt`` on the websocket port), one
  :class:`~.sessions.AccountSessions` per account;
* :mod:`.connection`: one client (CONNECT, PUBLISH QoS 0/1/2, SUBSCRIBE, wills, keep-alive, takeover);
* :mod:`.v5`: how MQTT 5 properties meet NATS headers, reply subjects and queue groups;
* :mod:`.sessions`: sessions, retained messages and consumers in nats-server's ``$MQTT_*`` streams;
* :mod:`.jsa`: the JetStream API requests those need (through the account's ``$JS.API``).

The packet codec is :mod:`natsd.protocol.mqtt` (sans-IO).
"""

from natsd.server.mqtt.listener import MQTTListener

__all__ = ["MQTTListener"]
