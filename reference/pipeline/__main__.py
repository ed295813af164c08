"""``python -m reference.pipeline``: run the CDC pipeline once; exit 0 only if the table matches."""

from __future__ import annotations

import argparse
import sys

from streamwire.cli import HelpFormatter, guarded
from reference.pipeline.job import Options, PipelineError, run


def _parser() -> argparse.ArgumentParser:
    d = Options()
    p = argparse.ArgumentParser(prog="python -m reference.pipeline", description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("--changes", type=int, default=d.changes, help="row changes to generate (all origins)")
    p.add_argument("--keys", type=int, default=d.keys, help="size of the key space")
    p.add_argument("--origins", type=int, default=d.origins, help="source origins (databases)")
    p.add_argument("--writers", type=int, default=d.writers, help="source tasks")
    p.add_argument("--readers", type=int, default=d.readers, help="sink tasks")
    p.add_argument("--store", default=d.store, help="Delta store root (path or URL); default: a temporary dir")
    p.add_argument("--table", default=d.table, help="table path under the store (must not exist)")
    p.add_argument("--provider", default=d.provider, help="cluster provider: memory or etcd://HOST:PORT")
    p.add_argument("--master", default=d.master, help="Spark master URL (default local[writers+readers,4])")
    p.add_argument("--host", default=d.host,
                   help="address the driver, its sync server and cluster service bind and advertise to executors")
    p.add_argument("--report", default=d.report, help="directory for figures.json and latency.png")
    p.add_argument("--keep", action="store_true", help="keep the work dir (Delta table, server log) of a run that passed")
    p.add_argument("--chaos", action="store_true", help="kill the sync server and one sink task mid-run")
    p.add_argument("--seed", type=int, default=d.seed, help="seed of the change stream")
    p.add_argument("--rate", type=float, default=d.rate, help="changes/s over all sources (0: unthrottled)")
    p.add_argument("--shuffle", default=d.shuffle, choices=["streaming", "spark"],
                   help="routing shuffle: the streaming shuffle (default) or PySpark's partitionBy as a baseline")
    return p


def main(argv: list[str] | None = None) -> int:
    """Exit 0 when the table matches, 1 when it does not, 2 (one line) when the run could not start."""
    args = _parser().parse_args(argv)

    def pipeline() -> int:
        try:
            outcome = run(Options(**vars(args)))
        except PipelineError as exc:
            print(f"pipeline: {exc}", file=sys.stderr)
            return 2
        return 0 if outcome.ok else 1

    return guarded("pipeline", pipeline)


if __name__ == "__main__":
    sys.exit(main())
