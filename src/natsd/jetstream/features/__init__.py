"""natsd's own JetStream features, beyond nats-server (issue 27).

Every feature is switched on by a stream or consumer ``metadata`` key under the ``natsd.`` prefix
(:mod:`natsd.jetstream.features.metadata`), so clients that know nothing of natsd (nats-py,
nats.js, nats.go, the ``nats`` CLI's ``--metadata``) use them unchanged, and a backup restored into
nats-server keeps its data with the features simply off (nats-server keeps unknown metadata).

=========================== ================================================================
``metadata.py``             the ``natsd.*`` keys: parse, validate (errors 19xxx), advertise
``deadletter.py``           a consumer's dead-letter subject (max deliveries / ``+TERM``)
``schemas.py``              JSON Schema validation of publishes, per subject pattern
``partition.py``            per-key ordered parallel pull consumers (``natsd.partition_key``)
=========================== ================================================================

Keep-last-under-max-age lives in the store (``StoreConfig.keep_last_under_max_age``, applied by
``natsd.store.seqindex`` expiry); its switch is parsed here.
"""
