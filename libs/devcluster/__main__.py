"""``python -m epochal.devcluster``: the same commands as ``epochal dev`` (``make run`` is its
``run``, the default: a local cluster in the foreground plus a demo workload)."""

import sys

from epochal.devcluster.commands import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m epochal.devcluster", default="run"))
