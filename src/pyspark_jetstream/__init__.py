"""Static registration hook for PySpark (>= 4.0).

PySpark registers Python data sources without an explicit ``spark.dataSource.register`` call by
importing every top-level module whose name starts with ``pyspark_`` and taking its
``DefaultSource`` (``pyspark/sql/worker/lookup_data_sources.py``); it does not read entry points.
This module exists only to be found that way; the implementation is :mod:`natsd.spark`.
"""

from natsd.spark import JetStreamDataSource as DefaultSource

__all__ = ["DefaultSource"]
