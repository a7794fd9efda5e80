"""What the server tells about itself: the HTTP monitoring endpoints (``endpoints``: ``/varz``,
``/connz``, ...), the Prometheus ``/metrics`` exposition (``metrics``), the live dashboard
(``dashboard/``) and the ``$SYS.REQ.SERVER.*`` system requests (``sysreq``).

Imported only when a monitoring port or a system account is configured.
"""
