"""An empty secret never means "no authentication" (issue #38, item 3): ``None`` is the one way to
turn a secret off; an empty or whitespace-only secret handed to the cluster service, its remote
client, a Spark conf, the shuffle's handshake settings or the sync server and client is refused
with EmptySecret in one line naming where it came from (``spec.shared_secret``), and a HELLO
without a secret is never admitted by a service that requires one (the service used to take
``secret=""`` or an empty ``spark.streamwire.cluster.secret`` as the secret every secret-less HELLO
matched). Secret files are covered by tests/test_secret_files.py."""

from __future__ import annotations

import socket
from typing import Callable, Iterator

import pytest

from reference.cluster.config import SECRET_CONF_KEY, service_secret
from reference.cluster.memory import InProcessCluster
from reference.cluster.remote import RemoteCluster, read_message
from reference.cluster.service import ClusterService
from reference.net.ledger import ResourceLedger
from reference.shuffle.cluster_directory import driver_directory_from_conf
from reference.spark.sync_datasource import SinkOptions
from reference.sync.credentials import ClientSecurity, ServerSecurity
from spec.auth.handshake import AuthConfig
from spec.auth.settings import auth_from_conf
from spec.cluster import wire
from spec.cluster.errors import Unauthenticated
from spec.shared_secret import EmptySecret

BLANKS = ["", " ", "\n", " \t\r\n"]


@pytest.fixture
def cluster() -> Iterator[InProcessCluster]:
    cluster = InProcessCluster()
    yield cluster
    cluster.close()


def refused_in_one_line(make: Callable[[], object], named: str) -> None:
    with pytest.raises(EmptySecret) as refused:
        make()
    said = str(refused.value)
    assert "\n" not in said and named in said and refused.value.condition == "EMPTY_SECRET", said


@pytest.mark.parametrize("blank", BLANKS)
def test_a_cluster_service_with_a_blank_secret_refuses_to_start(cluster: InProcessCluster, blank: str) -> None:
    ledger = ResourceLedger()
    refused_in_one_line(lambda: ClusterService(cluster, secret=blank, ledger=ledger), "secret")
    assert (ledger.sockets_opened, ledger.threads_started) == (0, 0), "it listened before refusing"


@pytest.mark.parametrize("blank", BLANKS)
def test_a_hello_secret_matches_only_a_non_empty_configured_secret(blank: str) -> None:
    for presented in ("", blank, "s3cret"):
        with pytest.raises(Unauthenticated):
            wire.check_hello_secret(presented, blank)
    with pytest.raises(Unauthenticated):
        wire.check_hello_secret("", "s3cret")
    wire.check_hello_secret("s3cret", "s3cret")
    wire.check_hello_secret("", None)  # no secret configured: authentication is off, explicitly


def test_a_service_without_a_secret_welcomes_and_one_with_a_secret_refuses_a_secretless_hello(
        cluster: InProcessCluster) -> None:
    for secret, welcomed in ((None, True), ("s3cret", False)):
        service = ClusterService(cluster, secret=secret)
        try:
            with socket.create_connection((service.host, service.port), timeout=20) as sock:
                sock.sendall(wire.encode(wire.ServiceKind.HELLO, 1, node_id=f"n-{welcomed}", secret="", takeover="",
                                         resume=False, resume_after=0))
                reply = read_message(sock)
            assert (reply.kind is wire.ServiceKind.WELCOME) is welcomed, (secret, reply)
        finally:
            service.close()


@pytest.mark.parametrize("conf", [
    {SECRET_CONF_KEY: ""},
    {SECRET_CONF_KEY: "  "},
    {SECRET_CONF_KEY: "", "spark.authenticate": "true", "spark.authenticate.secret": "sparks"},
    {"spark.authenticate": "true", "spark.authenticate.secret": ""},
    {"spark.authenticate": "true", "spark.authenticate.secret": "\n"},
])
def test_a_blank_secret_in_a_spark_conf_is_refused_in_one_line_naming_the_key(conf: dict[str, str]) -> None:
    named = SECRET_CONF_KEY if SECRET_CONF_KEY in conf else "spark.authenticate.secret"
    refused_in_one_line(lambda: service_secret(conf), named)
    refused_in_one_line(lambda: driver_directory_from_conf(conf), named)
    if named == "spark.authenticate.secret":  # the shuffle's handshake reads only that key
        refused_in_one_line(lambda: auth_from_conf(conf, "app", "generated"), named)


def test_unset_secrets_still_mean_authentication_off_or_spark_generated() -> None:
    assert service_secret({}) is None
    assert service_secret({"spark.authenticate.secret": ""}) is None  # spark.authenticate is off
    on = auth_from_conf({"spark.authenticate": "true"}, "app", "generated")
    assert on is not None and on.secret == b"generated"
    refused_in_one_line(lambda: auth_from_conf({"spark.authenticate": "true"}, "app", " "), "generated secret")


@pytest.mark.parametrize("blank", BLANKS)
def test_the_remote_client_refuses_a_url_with_a_blank_secret(blank: str) -> None:
    refused_in_one_line(lambda: RemoteCluster(f"tcp://:{blank.replace(chr(10), '%0A')}@127.0.0.1:9"), "secret")
    assert RemoteCluster("tcp://127.0.0.1:9").secret == ""  # no secret named: HELLO carries none


@pytest.mark.parametrize("blank", BLANKS)
def test_the_sync_server_and_client_refuse_a_blank_bearer_token(blank: str) -> None:
    refused_in_one_line(lambda: ServerSecurity(token=blank), "bearer token")
    refused_in_one_line(lambda: ClientSecurity(token=blank), "bearer token")
    assert ServerSecurity().token is None and ClientSecurity().call_headers() == []


def test_the_sync_sinks_empty_token_option_is_refused_not_taken_as_no_token() -> None:
    refused_in_one_line(lambda: SinkOptions.parse({"location": "grpc://h:1", "table": "t", "token": ""}, ["id"]),
                        "bearer token")


@pytest.mark.parametrize("blank", [b"", b" ", b"\t\r\n"])
def test_the_shuffle_handshake_refuses_a_blank_secret_given_outside_spark(blank: bytes) -> None:
    refused_in_one_line(lambda: AuthConfig(blank, "app"), "authentication secret")
