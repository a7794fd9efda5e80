"""The subjects an account's ``$JS.API`` listens on, apart from the router so that JetStream's
start subscribes them without loading the dispatcher, the error table and the request decoder
(issue 26, start-up time: they load with the first request). :mod:`.router` re-exports them."""

from __future__ import annotations

__all__ = ["JS_API_PREFIX", "API_SUBSCRIPTIONS"]

JS_API_PREFIX = "$JS.API."

# The API subjects an account listens on. Not "$JS.API.>": DIRECT.GET.<stream> and
# CONSUMER.MSG.NEXT.<stream>.<consumer> must give "no responders" when the stream / consumer does
# not exist (the reference skips its $JS.API.> import for those two prefixes), so they are
# subscribed by the streams and consumers themselves. These patterns cover every other API
# subject (the patterns never overlap, so a request is handled once); an unknown subject gets
# no reply at all (a client timeout), as the reference. The CONSUMER family is covered by token
# count up to 6 tokens, and per verb beyond, which leaves out exactly MSG.NEXT.<stream>.<consumer>.
_CONSUMER_VERBS = ("CREATE", "DURABLE", "NAMES", "LIST", "INFO", "DELETE", "PAUSE", "UNPIN", "RESET", "LEADER")
API_SUBSCRIPTIONS = (
    "$JS.API.*",
    "$JS.API.STREAM.>",
    "$JS.API.CONSUMER.*",
    "$JS.API.CONSUMER.*.*",
    "$JS.API.CONSUMER.*.*.*",
    *(f"$JS.API.CONSUMER.{verb}.*.*.>" for verb in _CONSUMER_VERBS),
    "$JS.API.META.>",
    "$JS.API.SERVER.>",
    "$JS.API.ACCOUNT.>",
    "$JS.API.DIRECT.*",
)
