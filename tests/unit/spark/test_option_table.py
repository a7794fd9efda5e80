"""The option table is the single source: every option the parsers read is in it, every row is
read somewhere, and docs/spark.md embeds exactly :func:`render_option_table` (so it cannot drift)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from natsd.spark.options import OPTIONS, OptionError, ReadOptions, WriteOptions, render_option_table, warn_unknown

ROOT = Path(__file__).resolve().parents[3]
SRC = ROOT / "src" / "natsd" / "spark"
BEGIN = "<!-- options:begin (generated: python -m natsd.spark options-table) -->"
END = "<!-- options:end -->"


def _names_read_by_the_code() -> set[str]:
    text = "".join(p.read_text() for p in SRC.glob("*.py"))
    return set(re.findall(r'\b(?:g|_get\(opts,)\s*\(?\s*"([A-Za-z.]+)"\)', text))


def test_every_option_read_is_documented_and_every_documented_option_is_read():
    documented = {o.name for o in OPTIONS}
    read = _names_read_by_the_code()
    assert read, "the scan found no option reads; update the regular expression"
    assert read - documented == set()
    assert documented - read == set()


def test_docs_embed_the_generated_table():
    doc = (ROOT / "docs" / "spark.md").read_text()
    assert BEGIN in doc and END in doc, "docs/spark.md lost its generated-table markers"
    embedded = doc.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n") + "\n"
    assert embedded == render_option_table(), (
        "docs/spark.md's option table differs from the code: regenerate it with "
        "`python -m natsd.spark options-table` and paste it between the markers"
    )


def test_unknown_options_are_reported_with_the_closest_name(caplog):
    caplog.set_level("WARNING", logger="natsd.spark")
    assert warn_unknown({"stream": "S", "startingoffset": "1", "checkpointlocation": "/x"}, "source") == [
        "startingoffset"
    ]
    assert "did you mean 'startingOffsets'" in caplog.text


@pytest.mark.parametrize(
    "opts,streaming,pattern",
    [
        (
            {"stream": "S", "fetchtimeout": "soon"},
            False,
            r"option 'fetchTimeout': invalid value 'soon'.*accepted: seconds",
        ),
        ({"stream": "S", "fetchtimeout": "0"}, False, r"'fetchTimeout'.*must be > 0"),
        (
            {"stream": "S", "minpartitions": "many"},
            True,
            r"'minPartitions': invalid value 'many'.*accepted: an integer >= 1",
        ),
        ({"stream": "S", "startingoffsets": "latest"}, False, r"'startingOffsets'.*'latest' is not allowed"),
        ({"stream": "S", "endingoffsets": "earliest"}, False, r"'endingOffsets'.*'earliest' is not allowed"),
        ({"stream": "S", "endingoffsets": "9"}, True, r"'endingOffsets' is for batch reads only"),
        ({"stream": "S", "endingtimestamp": "0"}, True, r"'endingTimestamp' is for batch reads only"),
        ({"stream": "S", "startingtimestamp": "yesterday"}, False, r"'startingTimestamp': invalid value 'yesterday'"),
        (
            {"stream": "S", "headervaluetype": "text"},
            False,
            r"'headerValueType': invalid value 'text'.*binary or string",
        ),
        ({"stream": "S", "servers": "http://x:1"}, False, r"'servers'.*not a nats:// or tls:// URL"),
        ({"stream": "S", "servers": "nats://x:port"}, False, r"'servers': invalid value"),
        ({"stream": "A.B"}, False, r"'stream': invalid value 'A.B'"),
        ({"stream": "S", "subjects": "a..b"}, False, r"'subjects'.*'a..b' is not a subject"),
        ({"stream": "S", "maxoffsetspertrigger": "0"}, True, r"'maxOffsetsPerTrigger'.*>= 1"),
    ],
)
def test_read_option_errors_name_option_value_and_accepted(opts, streaming, pattern):
    with pytest.raises(OptionError, match=pattern):
        ReadOptions.parse(opts, streaming=streaming)


@pytest.mark.parametrize(
    "opts,pattern",
    [
        ({"minduplicatewindow": "soon"}, r"'minDuplicateWindow': invalid value 'soon'.*seconds"),
        ({"maxinflight": "-1"}, r"'maxInFlight'.*>= 1"),
        ({"idempotence": "always"}, r"'idempotence': invalid value 'always'.*none, positional or column:<name>"),
        ({"subject": "a.*"}, r"option 'subject': invalid subject 'a.\*'"),
        ({"subject": "a.b", "topic": "c.d"}, r"'subject' \('a.b'\) and 'topic' \('c.d'\) disagree"),
    ],
)
def test_write_option_errors(opts, pattern):
    with pytest.raises(OptionError, match=pattern):
        WriteOptions.parse(opts, streaming=True)


def test_schema_validation_checks_values_for_writes_without_requiring_a_stream():
    from natsd.spark.datasource import validate_definition

    assert validate_definition({"subject": "x.y"}) == (False, False)  # a write's schema() call
    assert validate_definition({"stream": "S", "includeheaders": "true", "headervaluetype": "string"}) == (True, True)
    with pytest.raises(OptionError, match="minDuplicateWindow"):
        validate_definition({"subject": "x.y", "minduplicatewindow": "soon"})
    with pytest.raises(OptionError, match="exactly one of"):
        validate_definition({"stream": "S", "streampattern": "T"})


def test_the_readme_links_the_reference():
    readme = (ROOT / "README.md").read_text()
    assert "](docs/spark.md)" in readme and "](docs/spark.md#running-on-a-cluster)" in readme
    assert "## Running on a cluster" in (ROOT / "docs" / "spark.md").read_text()
