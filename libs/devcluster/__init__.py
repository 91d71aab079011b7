"""The local dev cluster: real CMS and replica processes on 127.0.0.1 with SQLite.

``python -m epochal.devcluster`` is ``make run``; ``cms.LocalCMS`` and ``cluster.LocalCluster``
start, stop, kill and restart the processes for the tests and the benchmarks."""
