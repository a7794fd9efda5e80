"""Client programs nobody here wrote (nats.js, libnats), run against natsd and nats-server."""
