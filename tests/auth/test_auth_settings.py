"""Which Spark settings turn the shuffle's handshake on, and how their values are read."""

from __future__ import annotations

import pytest

from spec.auth import CipherName
from spec.auth.settings import auth_from_conf


def test_off_unless_spark_authenticate_is_true_in_any_case() -> None:
    assert auth_from_conf({}, "app", "s") is None
    assert auth_from_conf({"spark.authenticate": "false", "spark.authenticate.secret": "s"}, "app", None) is None
    on = auth_from_conf({"spark.authenticate": " TRUE "}, "app", "generated")
    assert on is not None and on.secret == b"generated" and on.app_id == "app"
    assert on.cipher is CipherName.CTR and on.engine_version == 1


def test_the_configured_secret_cipher_and_version_win() -> None:
    auth = auth_from_conf({"spark.authenticate": "true", "spark.authenticate.secret": "mine",
                           "spark.network.crypto.cipher": "aes/gcm/nopadding",
                           "spark.network.crypto.authEngineVersion": "2"}, "app", "generated")
    assert auth is not None and auth.secret == b"mine" and auth.cipher is CipherName.GCM and auth.engine_version == 2


@pytest.mark.parametrize(("conf", "named"), [
    ({"spark.authenticate": "yes"}, "spark.authenticate"),
    ({"spark.authenticate": "true"}, "spark.authenticate.secret"),
    ({"spark.authenticate": "true", "spark.authenticate.secret": "s", "spark.network.crypto.authEngineVersion": "3"},
     "authEngineVersion"),
    ({"spark.authenticate": "true", "spark.authenticate.secret": "s", "spark.network.crypto.cipher": "AES/CBC"},
     "Unsupported cipher mode"),
])
def test_bad_settings_are_refused_naming_what_is_wrong(conf: dict[str, str], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        auth_from_conf(conf, "app", None)
