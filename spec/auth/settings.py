"""Which Spark settings turn the handshake on and shape it, read as Spark reads them.

``spark.authenticate`` on means every shuffle connection runs the AuthEngine handshake with the
application's secret and is then encrypted. Spark's AuthEngine has no unencrypted mode (with
``spark.network.crypto.enabled`` off Spark falls back to SASL for its own connections), so here the
shuffle is authenticated and encrypted whenever ``spark.authenticate`` is on.
"""

from __future__ import annotations

from typing import Final, Mapping

from spec.auth.ciphers import CipherName
from spec.auth.handshake import AuthConfig
from spec.shared_secret import configured_secret

AUTHENTICATE_KEY: Final = "spark.authenticate"
SECRET_KEY: Final = "spark.authenticate.secret"
CIPHER_KEY: Final = "spark.network.crypto.cipher"
ENGINE_VERSION_KEY: Final = "spark.network.crypto.authEngineVersion"


def enabled(conf: Mapping[str, str], key: str, default: bool = False) -> bool:
    """A boolean setting as Scala's ``toBoolean`` reads it (trimmed, any case); absent is ``default``."""
    text = conf.get(key, str(default)).strip().lower()
    if text not in ("true", "false"):
        raise ValueError(f"{key} should be boolean, but was {conf[key]!r}")
    return text == "true"


def auth_from_conf(conf: Mapping[str, str], app_id: str, secret: str | None) -> AuthConfig | None:
    """The handshake a job's settings ask for, None when ``spark.authenticate`` is off.

    ``secret``: the one Spark generated for the application, used when ``spark.authenticate.secret``
    is not set. Raises ValueError (naming the key) for a missing secret, an unknown cipher or version,
    and EmptySecret (a ValueError) for a blank one, set or generated.
    """
    if not enabled(conf, AUTHENTICATE_KEY):
        return None
    chosen = configured_secret(conf[SECRET_KEY], SECRET_KEY) if SECRET_KEY in conf else \
        configured_secret(secret, "the application's generated secret")
    if chosen is None:
        raise ValueError(f"{AUTHENTICATE_KEY} is true but no secret is known: set {SECRET_KEY}")
    version = conf.get(ENGINE_VERSION_KEY, "1").strip()
    if version not in ("1", "2"):
        raise ValueError(f"{ENGINE_VERSION_KEY} must be 1 or 2, got {version!r}")
    return AuthConfig(chosen.encode(), app_id, CipherName.parse(conf.get(CIPHER_KEY, CipherName.CTR.value)),
                      int(version))
