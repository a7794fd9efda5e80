"""Byte transports under a connection: protocol layers (``layer``), TLS (``tls``), WebSocket, server
(``websocket``) and client (``wsclient``) side, and the busy-polling event loop (``busypoll``).

A connection's per-message code never knows which of them it runs over: each is an
``asyncio.Protocol``/``Transport`` pair stacked under the connection.
"""
