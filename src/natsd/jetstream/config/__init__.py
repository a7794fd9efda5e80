"""JetStream configuration: the stream and consumer config models, their validation, and the
request structs of the ``$JS.API`` (decoded as nats-server decodes them, see
:mod:`natsd.jetstream.gojson`).

* :mod:`~natsd.jetstream.config.models`: ``StreamConfig`` and the policy enums, JSON in and out;
* :mod:`~natsd.jetstream.config.stream_checks`: stream-config defaults, validation and update rules;
* :mod:`~natsd.jetstream.config.consumer_config`: ``ConsumerConfig`` with its defaults and checks;
* :mod:`~natsd.jetstream.config.requests`: the API request structs, as data.

Nothing here holds state or reaches a stream, a consumer or the network.
"""
