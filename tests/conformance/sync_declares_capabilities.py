"""An ``exec:`` sync server that declares its capabilities itself: ``CAPABILITIES store`` (no
restart) before the reference server's ``LISTENING <port>``."""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":
    print("CAPABILITIES store", flush=True)
    os.execv(sys.executable, [sys.executable, "-m", "reference.sync", *sys.argv[1:]])
