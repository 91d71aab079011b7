"""Paths as Spark resolves them, through Hadoop's file system API: a path without a scheme is
on the cluster's default file system (the local one on local[*], HDFS on YARN); ``file:``,
``hdfs:``, ``s3a:`` are what they say. The job asks it whether inputs exist and are folders, and
writes its small files (summary, dashboard) through it, beside the tables, and moves a table
rewritten into place."""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession


def hadoop_path(spark: SparkSession, path: str) -> tuple[Any, Any]:
    """(file system, path) of ``path``."""
    jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
    located = jvm.org.apache.hadoop.fs.Path(path)
    conf = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[attr-defined]
    return located.getFileSystem(conf), located


def exists(spark: SparkSession, path: str) -> bool:
    fs, located = hadoop_path(spark, path)
    return bool(fs.exists(located))


def is_folder(spark: SparkSession, path: str) -> bool:
    fs, located = hadoop_path(spark, path)
    return bool(fs.getFileStatus(located).isDirectory())


def write_text(spark: SparkSession, path: str, text: str) -> None:
    """``text`` to ``path``, replacing it."""
    fs, located = hadoop_path(spark, path)
    stream = fs.create(located, True)
    try:
        stream.write(bytearray(text.encode()))
    finally:
        stream.close()


def replace(spark: SparkSession, source: str, target: str) -> None:
    """Move folder ``source`` to ``target``, replacing what ``target`` held: the old folder is
    moved aside first and deleted last, so a failure in between leaves one of them in place."""
    fs, located = hadoop_path(spark, target)
    _, moved = hadoop_path(spark, source)
    aside = hadoop_path(spark, f"{target.rstrip('/')}._replaced")[1]
    fs.delete(aside, True)  # a previous failure's leftover
    had = bool(fs.exists(located))
    if had and not fs.rename(located, aside):
        raise OSError(f"could not move {target} aside")
    if not fs.rename(moved, located):
        if had:
            fs.rename(aside, located)
        raise OSError(f"could not move {source} to {target}")
    if had:
        fs.delete(aside, True)
