"""``python -m natsd.spark options-table``: print the option table docs/spark.md embeds."""

import sys

from natsd.spark.options import render_option_table


def main(argv: list[str]) -> int:
    if argv != ["options-table"]:
        print("usage: python -m natsd.spark options-table", file=sys.stderr)
        return 2
    sys.stdout.write(render_option_table())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
