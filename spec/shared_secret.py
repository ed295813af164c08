"""What a configured shared secret may be, for every protocol that takes one (the cluster service's
HELLO secret, the sync server's bearer token, the shuffle's ``spark.authenticate.secret``).

``None`` is the one way to say "no authentication". An empty or whitespace-only secret is refused
(:class:`EmptySecret`): a peer that presents no secret presents the empty one, so taking it would
turn authentication off while the setting says it is on. A presented secret matches only a usable
configured one, compared in constant time.
"""

from __future__ import annotations

import hmac
from typing import ClassVar

from spec.errors import RuntimeFailure


class EmptySecret(RuntimeFailure, ValueError):
    """A secret was given but it is empty or only whitespace; ``setting`` names where it came from."""

    condition: ClassVar[str] = "EMPTY_SECRET"

    def __init__(self, setting: str) -> None:
        super().__init__(f"{setting} is empty or only whitespace: give a secret, or none to turn "
                         "authentication off", setting=setting)


def required_secret(secret: str, setting: str) -> str:
    """``secret`` as given; raises EmptySecret naming ``setting`` when it is blank."""
    if not secret.strip():
        raise EmptySecret(setting)
    return secret


def configured_secret(secret: str | None, setting: str) -> str | None:
    """``secret`` as given, None meaning authentication off; raises EmptySecret when it is blank."""
    return None if secret is None else required_secret(secret, setting)


def secret_matches(presented: str, configured: str) -> bool:
    """Whether a peer presented ``configured``; never true for a blank ``configured``."""
    return bool(configured.strip()) and hmac.compare_digest(presented.encode(), configured.encode())
