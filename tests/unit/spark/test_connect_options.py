"""Connection options: JetStream domain / API prefix, client certificate, bare nkey seed."""

from __future__ import annotations

import pytest

from natsd.spark.options import OptionError, connect_options
from natsd.spark.wire import seed_text


def test_domain_and_api_prefix_choose_the_jetstream_api():
    assert connect_options({}).api_prefix == "$JS.API"
    assert connect_options({"domain": "EDGE"}).api_prefix == "$JS.EDGE.API"
    assert connect_options({"apiprefix": "$JS.EDGE.API."}).api_prefix == "$JS.EDGE.API"
    assert connect_options({"apiprefix": "JS.acct.API"}).api_prefix == "JS.acct.API"


@pytest.mark.parametrize(
    "opts, words",
    [
        ({"domain": "A", "apiprefix": "$JS.B.API"}, "exclude each other"),
        ({"domain": "a.b"}, "option 'domain': invalid value 'a.b'"),
        ({"domain": "*"}, "option 'domain'"),
        ({"apiprefix": "$JS.*.API"}, "option 'apiPrefix'"),
        ({"apiprefix": "a..b"}, "option 'apiPrefix'"),
        ({"tlskey": "/k.pem"}, "'tlsKey' needs 'tlsCert'"),
    ],
)
def test_bad_connection_options_are_named(opts, words):
    with pytest.raises(OptionError, match=words.replace(".", r"\.").replace("*", r"\*").replace("$", r"\$")):
        connect_options(opts)


def test_tls_client_certificate_and_nkey_travel_to_the_tasks():
    co = connect_options({"tlscert": "/c.pem", "tlskey": "/k.pem", "nkey": "SUAB"})
    assert (co.tls_cert, co.tls_key, co.nkey_seed) == ("/c.pem", "/k.pem", "SUAB")
    assert "SUAB" not in repr(co)  # Spark logs partitions; the seed never shows
    assert "secret" not in repr(connect_options({"password": "secret", "user": "u", "token": None}))


def test_seed_inline_or_from_a_file(tmp_path):
    assert seed_text(" SUAXYZ ") == "SUAXYZ"
    f = tmp_path / "u.nk"
    f.write_text("# a user seed\nSUAFILE\n")
    assert seed_text(str(f)) == "SUAFILE"
