"""A deliberately broken ``exec:`` shuffle implementation, to prove the suite catches deviations.

It is the reference endpoint with one fault injected into its transport from here: every
sequence number it sends is one too high (a writer numbers DATA from 1; a reader's
TERMINATION_ACK echoes seq + 1).
"""

from __future__ import annotations

import sys

from outgoing_faults import off_by_one, rewriting_outgoing

from conformance.shuffle import reference_target

if __name__ == "__main__":
    with rewriting_outgoing(off_by_one):
        sys.exit(reference_target.main())
