"""What the real pulsar-admin, run against the real Pulsar 4.2.4 standalone and against serve
(tests/oracle/test_admin_compare.py), found serve's admin REST answering otherwise: each test
here pins Pulsar's answer, over real HTTP against a real server on 127.0.0.1."""
from __future__ import annotations

import json

import pytest
import requests

from rest_helpers import RestServer

V2 = "/admin/v2"
T = "persistent/public/default"


@pytest.fixture
def rest(store_path):
    server = RestServer(store_path).start()
    session = requests.Session()

    class Client:
        url = server.url

        def __call__(self, method, path, body=None, **params):
            data = None if body is None else json.dumps(body)
            headers = {"Content-Type": "application/json"} if data is not None else {}
            return session.request(method, server.url + path, data=data, headers=headers,
                                   params=params or None, timeout=30)
    yield Client()
    session.close()
    server.stop()


def reason_of(r, status):
    assert r.status_code == status, (r.status_code, r.text)
    return r.json()["reason"]


# -- clusters ---------------------------------------------------------------------------------------
def test_runtime_configuration_names_the_cluster(rest):
    """pulsar-admin clusters list asks the broker's runtime configuration for clusterName (to
    mark the current cluster): a 404 there failed the whole command."""
    r = rest("GET", f"{V2}/brokers/configuration/runtime")
    assert r.status_code == 200
    conf = r.json()
    assert conf["clusterName"] == "standalone"
    # Every value is text, as Java's toString gives it.
    assert all(isinstance(v, str) for v in conf.values())
    assert conf["brokerDeduplicationEnabled"] == "false"
    assert conf["maxMessageSize"] == str(5 * 1024 * 1024)
    assert conf["webServicePort"] == str(rest.url.rsplit(":", 1)[1])


def test_cluster_data_leaves_out_what_is_not_configured(rest):
    """Pulsar's ClusterData of a standalone without TLS has no TLS URLs (not ""), no
    peerClusterNames, and the broker-client TLS settings' defaults."""
    doc = rest("GET", f"{V2}/clusters/standalone").json()
    assert doc == {
        "serviceUrl": rest.url, "brokerServiceUrl": "pulsar://127.0.0.1:6650",
        "brokerClientTlsEnabled": False, "tlsAllowInsecureConnection": False,
        "brokerClientTlsEnabledWithKeyStore": False, "brokerClientTlsTrustStoreType": "JKS",
        "brokerClientTlsKeyStoreType": "JKS",
        "brokerClientSslFactoryPlugin": "org.apache.pulsar.common.util.DefaultPulsarSslFactory"}


# -- tenants ----------------------------------------------------------------------------------------
def test_tenant_update_replaces_its_info(rest):
    """pulsar-admin tenants update POSTs the whole TenantInfo; serve answered 501."""
    assert rest("PUT", f"{V2}/tenants/acme", {"allowedClusters": ["standalone"]}).status_code == 204
    r = rest("POST", f"{V2}/tenants/acme", {"adminRoles": ["ops", "dev"],
                                            "allowedClusters": ["standalone"]})
    assert r.status_code == 204
    assert rest("GET", f"{V2}/tenants/acme").json() == {"adminRoles": ["ops", "dev"],
                                                        "allowedClusters": ["standalone"]}
    reason_of(rest("POST", f"{V2}/tenants/acme", {"allowedClusters": ["elsewhere"]}), 412)
    reason_of(rest("POST", f"{V2}/tenants/nope", {"allowedClusters": ["standalone"]}), 404)
    assert rest("GET", f"{V2}/tenants/acme").json()["adminRoles"] == ["ops", "dev"]


# -- namespaces -------------------------------------------------------------------------------------
def test_namespace_policies_are_pulsars_policies_object(rest):
    """Pulsar's Policies of a new namespace: replicated in the one cluster, four bundles,
    every default present; what the namespace sets is added; nothing is null."""
    assert rest("PUT", f"{V2}/namespaces/public/ns1").status_code == 204
    assert rest("POST", f"{V2}/namespaces/public/ns1/messageTTL", 60).status_code == 204
    doc = rest("GET", f"{V2}/namespaces/public/ns1").json()
    assert doc["replication_clusters"] == ["standalone"]
    assert doc["bundles"] == {"numBundles": 4, "boundaries": [
        "0x00000000", "0x40000000", "0x80000000", "0xc0000000", "0xffffffff"]}
    assert doc["backlog_quota_map"] == {} and doc["is_allow_auto_update_schema"] is True
    assert doc["schema_compatibility_strategy"] == "UNDEFINED"
    assert doc["auth_policies"] == {"namespace_auth": {}, "destination_auth": {},
                                    "subscription_auth_roles": {}}
    assert doc["message_ttl_in_seconds"] == 60
    assert None not in doc.values()


@pytest.mark.parametrize("policy", ["messageTTL", "retention", "deduplication"])
def test_a_policy_not_set_is_200_with_no_body(rest, policy):
    """Pulsar answers GET of a namespace policy that is not set with 200 and an empty body
    (serve said 204)."""
    r = rest("GET", f"{V2}/namespaces/public/default/{policy}")
    assert (r.status_code, r.content) == (200, b"")


def test_a_namespace_without_a_schema_strategy_answers_undefined(rest):
    """Pulsar answers the namespace's own policies.schema_compatibility_strategy, UNDEFINED
    while it sets none (the broker's then applies); serve answered the broker's FULL."""
    url = f"{V2}/namespaces/public/default/schemaCompatibilityStrategy"
    assert rest("GET", url).json() == "UNDEFINED"
    assert rest("PUT", url, "FORWARD").status_code == 204
    assert rest("GET", url).json() == "FORWARD"
    assert rest("PUT", url, "UNDEFINED").status_code == 204
    assert rest("GET", url).json() == "UNDEFINED"


# -- topics ------------------------------------------------------------------------------------------
def test_updating_partitions_of_a_topic_that_is_not_partitioned_is_a_conflict(rest):
    """Pulsar: 409 "is not the partitioned topic" (serve said 404), fewer partitions 422, the
    same number accepted."""
    r = rest("POST", f"{V2}/{T}/nope/partitions", 4)
    assert reason_of(r, 409) == "Topic persistent://public/default/nope is not the partitioned topic."
    assert rest("PUT", f"{V2}/{T}/p/partitions", 3).status_code == 204
    assert reason_of(rest("POST", f"{V2}/{T}/p/partitions", 2), 422) == (
        "Desired partitions 2 can't be less than the current partitions 3.")
    assert rest("POST", f"{V2}/{T}/p/partitions", 3).status_code == 204
    assert rest("POST", f"{V2}/{T}/p/partitions", 5).status_code == 204
    assert rest("GET", f"{V2}/{T}/p/partitions").json()["partitions"] == 5


# -- topic stats --------------------------------------------------------------------------------------
def produce(run_proc, topic, *values):
    r = run_proc("produce", topic, *[a for v in values for a in ("-m", v)])
    assert r.returncode == 0, r.stderr


def stats(rest, topic):
    r = rest("GET", f"{V2}/{T}/{topic}/stats")
    assert r.status_code == 200, r.text
    return r.json()


def test_stats_give_the_backlog_quota_limits_minus_one_when_none_is_set(rest, run_proc):
    """Pulsar's backlogQuotaLimitSize / backlogQuotaLimitTime are -1 without a quota (serve
    left them out: pulsar-admin printed 0), the limits when one is set; and
    oldestBacklogMessageAgeSeconds is -1 unless a time limit makes the broker check it."""
    produce(run_proc, "q", "a")
    doc = stats(rest, "q")
    assert (doc["backlogQuotaLimitSize"], doc["backlogQuotaLimitTime"],
            doc["oldestBacklogMessageAgeSeconds"]) == (-1, -1, -1)
    r = run_proc("namespaces", "set-backlog-quota", "public/default", "-l", "1M", "-p",
                 "producer_exception")
    assert r.returncode == 0, r.stderr
    r = run_proc("namespaces", "set-backlog-quota", "public/default", "-lt", "1h", "-p",
                 "producer_exception", "-t", "message_age")
    assert r.returncode == 0, r.stderr
    assert rest("PUT", f"{V2}/{T}/q/subscription/s", {"ledgerId": -1, "entryId": -1}
                ).status_code == 204
    doc = stats(rest, "q")
    assert (doc["backlogQuotaLimitSize"], doc["backlogQuotaLimitTime"]) == (1024 * 1024, 3600)
    assert doc["oldestBacklogMessageAgeSeconds"] >= 0


def test_partitioned_stats_take_the_quota_limits_and_no_deduplication_status(rest, run_proc):
    """Pulsar's PartitionedTopicStats: the partitions' quota limits (-1 without a quota), no
    deduplicationStatus of the whole (serve gave one), the partitions' own when asked."""
    assert rest("PUT", f"{V2}/{T}/pp/partitions", 2).status_code == 204
    produce(run_proc, "pp", "a", "b")
    doc = rest("GET", f"{V2}/{T}/pp/partitioned-stats", perPartition="true").json()
    assert "deduplicationStatus" not in doc
    assert (doc["backlogQuotaLimitSize"], doc["backlogQuotaLimitTime"]) == (-1, -1)
    part = doc["partitions"]["persistent://public/default/pp-partition-0"]
    assert part["deduplicationStatus"] == "Disabled" and part["backlogQuotaLimitSize"] == -1


def test_subscription_stats_count_the_backlog_not_delayed(rest, run_proc):
    """msgBacklogNoDelayed: the backlog less the messages delayed delivery holds back (serve
    left it out: pulsar-admin printed 0)."""
    produce(run_proc, "nd", "a", "b")
    r = run_proc("produce", "nd", "-m", "later", "--deliver-after", "1h")
    assert r.returncode == 0, r.stderr
    r = run_proc("consume", "nd", "-s", "sh", "-t", "Shared", "-p", "Earliest", "-n", "0",
                 "--idle-timeout", "0")
    assert r.returncode == 0, r.stderr
    sub = stats(rest, "nd")["subscriptions"]["sh"]
    assert (sub["msgBacklog"], sub["msgBacklogNoDelayed"]) == (1, 0)
    produce(run_proc, "nd", "c")
    sub = stats(rest, "nd")["subscriptions"]["sh"]
    assert (sub["msgBacklog"], sub["msgBacklogNoDelayed"]) == (2, 1)


def test_a_subscription_no_consumer_has_come_to_is_of_type_none(rest, run_proc):
    """Pulsar reports type None for a subscription made by pulsar-admin until a consumer comes
    (serve said Exclusive); the first consumer gives it its type, which stays after it goes."""
    produce(run_proc, "ty", "a")
    assert rest("PUT", f"{V2}/{T}/ty/subscription/s", {"ledgerId": -1, "entryId": -1}
                ).status_code == 204
    assert stats(rest, "ty")["subscriptions"]["s"]["type"] == "None"
    r = run_proc("consume", "ty", "-s", "s", "-n", "1")
    assert r.returncode == 0, r.stderr
    assert stats(rest, "ty")["subscriptions"]["s"]["type"] == "Exclusive"
    assert rest("PUT", f"{V2}/{T}/ty/subscription/s2", {"ledgerId": -1, "entryId": -1}
                ).status_code == 204
    r = run_proc("consume", "ty", "-s", "s2", "-t", "Shared", "-n", "1")
    assert r.returncode == 0, r.stderr
    assert stats(rest, "ty")["subscriptions"]["s2"]["type"] == "Shared"


def test_stats_name_the_owner_broker(rest, run_proc):
    """ownerBroker: host:port of the broker's web service (serve left it out), on a topic and
    on each partition of a partitioned one, not on the whole."""
    produce(run_proc, "ow", "a")
    assert stats(rest, "ow")["ownerBroker"] == rest.url.split("//")[1]
    assert rest("PUT", f"{V2}/{T}/pw/partitions", 2).status_code == 204
    doc = rest("GET", f"{V2}/{T}/pw/partitioned-stats", perPartition="true").json()
    assert "ownerBroker" not in doc
    assert {p["ownerBroker"] for p in doc["partitions"].values()} == {rest.url.split("//")[1]}


# -- expire-messages ---------------------------------------------------------------------------------
def sub_stats(rest, topic, sub):
    return stats(rest, topic)["subscriptions"][sub]


def test_expire_with_time_zero_expires_every_message_published_until_now(rest, run_proc):
    """pulsar-admin topics expire-messages -t 0: Pulsar's expiry monitor looks for messages
    published at or before now - 0, so all of them go (serve expired none)."""
    produce(run_proc, "ex0", "a", "b", "c")
    assert rest("PUT", f"{V2}/{T}/ex0/subscription/s", {"ledgerId": -1, "entryId": -1}
                ).status_code == 204
    assert rest("POST", f"{V2}/{T}/ex0/subscription/s/expireMessages/3600").status_code == 204
    assert sub_stats(rest, "ex0", "s")["msgBacklog"] == 3
    assert sub_stats(rest, "ex0", "s")["lastMarkDeleteAdvancedTimestamp"] == 0
    assert rest("POST", f"{V2}/{T}/ex0/subscription/s/expireMessages/0").status_code == 204
    sub = sub_stats(rest, "ex0", "s")
    assert sub["msgBacklog"] == 0
    assert sub["lastExpireTimestamp"] > 0 and sub["lastMarkDeleteAdvancedTimestamp"] > 0


def test_stats_count_the_messages_expired(rest, run_proc):
    """totalMsgExpired: what expiries have acknowledged on the subscription (serve left it out:
    pulsar-admin printed 0)."""
    produce(run_proc, "tme", "a", "b")
    assert rest("PUT", f"{V2}/{T}/tme/subscription/s", {"ledgerId": -1, "entryId": -1}
                ).status_code == 204
    assert sub_stats(rest, "tme", "s")["totalMsgExpired"] == 0
    assert rest("POST", f"{V2}/{T}/tme/subscription/s/expireMessages/0").status_code == 204
    produce(run_proc, "tme", "c")
    assert rest("POST", f"{V2}/{T}/tme/subscription/s/expireMessages/0").status_code == 204
    assert sub_stats(rest, "tme", "s")["totalMsgExpired"] == 3


def test_expiring_a_subscription_without_a_backlog_is_a_conflict(rest, run_proc):
    """Pulsar does not issue an expiry on a subscription with no backlog: 409 (serve said
    204), and lastExpireTimestamp stays as it was; for all subscriptions, one without a
    backlog makes the answer 409 while the others are expired."""
    produce(run_proc, "exc", "a", "b")
    for s in ("s1", "s2"):
        assert rest("PUT", f"{V2}/{T}/exc/subscription/{s}", {"ledgerId": -1, "entryId": -1}
                    ).status_code == 204
    assert rest("POST", f"{V2}/{T}/exc/subscription/s1/skip_all").status_code == 204
    text = reason_of(rest("POST", f"{V2}/{T}/exc/subscription/s1/expireMessages/0"), 409)
    assert text.startswith("Expire message by timestamp not issued on topic "
                           "persistent://public/default/exc for subscription s1")
    assert sub_stats(rest, "exc", "s1")["lastExpireTimestamp"] == 0
    reason_of(rest("POST", f"{V2}/{T}/exc/all_subscription/expireMessages/0"), 409)
    assert sub_stats(rest, "exc", "s2")["msgBacklog"] == 0   # expired all the same
    reason_of(rest("POST", f"{V2}/{T}/exc/subscription/nope/expireMessages/0"), 404)


# -- internal stats -----------------------------------------------------------------------------------
def test_internal_stats_are_pulsars(rest, run_proc):
    """As Pulsar answers stats-internal: the ledger being written shows 0 entries and 0 bytes
    (currentLedgerEntries counts them), a cursor without consumers is not active, the entries
    since the first unacked message count (mark-delete, read position], and schemaLedgers and
    compactedLedger are there (serve: 3 entries, active, 0, and neither)."""
    produce(run_proc, "is", "a", "b", "c")
    assert rest("PUT", f"{V2}/{T}/is/subscription/s", {"ledgerId": -1, "entryId": -1}
                ).status_code == 204
    doc = rest("GET", f"{V2}/{T}/is/internalStats").json()
    assert doc["currentLedgerEntries"] == 3 and doc["numberOfEntries"] == 3
    assert [(x["entries"], x["size"]) for x in doc["ledgers"]] == [(0, 0)]
    cur = doc["cursors"]["s"]
    assert cur["active"] is False
    # mark-delete before the first entry, read position at it: one position in between
    assert cur["numberOfEntriesSinceFirstNotAckedMessage"] == 1
    assert doc["schemaLedgers"] == []
    assert doc["compactedLedger"] == {"ledgerId": -1, "entries": -1, "size": -1,
                                      "offloaded": False, "underReplicated": False}
    r = run_proc("receive", "is", "-s", "s", "-n", "2", "--lease", "10m")
    assert r.returncode == 0, r.stderr
    cur = rest("GET", f"{V2}/{T}/is/internalStats").json()["cursors"]["s"]
    assert cur["active"] is True
    assert cur["numberOfEntriesSinceFirstNotAckedMessage"] == 3


# -- messages: peek, examine, get by id -------------------------------------------------------------
def test_peek_reads_the_nth_entry_not_acked_with_pulsars_headers(rest, run_proc):
    """GET .../subscription/{sub}/position/{n}, as pulsar-admin peek-messages asks it (serve
    had no such route: pulsar-admin printed nothing): the payload in the body, the metadata in
    X-Pulsar-* headers, 404 past the last entry, the acknowledged ones left out."""
    r = run_proc("produce", "pk", "-m", "one", "-m", "two", "-m", "three", "-k", "k1",
                 "-p", "color=red", "-db")
    assert r.returncode == 0, r.stderr
    assert rest("PUT", f"{V2}/{T}/pk/subscription/s", {"ledgerId": -1, "entryId": -1}
                ).status_code == 204
    first = rest("GET", f"{V2}/{T}/pk/subscription/s/position/1")
    assert first.status_code == 200 and first.content == b"one"
    h = first.headers
    last = rest("GET", f"{V2}/{T}/pk/lastMessageId").json()
    assert h["X-Pulsar-Message-ID"] == f"{last['ledgerId']}:{last['entryId'] - 2}"
    assert json.loads(h["X-Pulsar-PROPERTY"]) == {"color": "red"}
    assert h["X-Pulsar-partition-key"] == "k1" and h["X-Pulsar-Is-Encrypted"] == "false"
    assert h["X-Pulsar-publish-time"].endswith("Z") and h["X-Pulsar-sequence-id"] == "0"
    assert rest("GET", f"{V2}/{T}/pk/subscription/s/position/3").content == b"three"
    assert reason_of(rest("GET", f"{V2}/{T}/pk/subscription/s/position/4"), 404) == (
        "Message not found")
    assert rest("POST", f"{V2}/{T}/pk/subscription/s/skip/1").status_code == 204
    assert rest("GET", f"{V2}/{T}/pk/subscription/s/position/1").content == b"two"
    # Peeking changes nothing.
    assert sub_stats(rest, "pk", "s")["msgBacklog"] == 2
    reason_of(rest("GET", f"{V2}/{T}/nope/subscription/s/position/1"), 404)
    assert rest("PUT", f"{V2}/{T}/pp/partitions", 2).status_code == 204
    reason_of(rest("GET", f"{V2}/{T}/pp/subscription/s/position/1"), 405)


def test_a_batch_is_peeked_whole_as_pulsars_batch_payload(rest, run_proc):
    """A batch entry is one answer: X-Pulsar-num-batch-message and the wire's batch payload
    ([size][SingleMessageMetadata][payload] per message), which pulsar-admin splits."""
    from pulsarctl.serve.frames import split_batch

    r = run_proc("produce", "bt", "-m", "a", "-m", "bb", "-m", "ccc",
                 "--batching-max-messages", "3")
    assert r.returncode == 0, r.stderr
    assert rest("PUT", f"{V2}/{T}/bt/subscription/s", {"ledgerId": -1, "entryId": -1}
                ).status_code == 204
    got = rest("GET", f"{V2}/{T}/bt/subscription/s/position/1")
    assert got.headers["X-Pulsar-num-batch-message"] == "3"
    assert [p for _smm, p in split_batch(got.content, 3)] == [b"a", b"bb", b"ccc"]


def test_examine_and_get_by_id_read_one_entry(rest, run_proc):
    """examinemessage counts entries from the first (earliest) or the last (latest) one; a
    topic without messages is Pulsar's 412; ledger/{l}/entry/{e} reads one entry (serve had
    neither route)."""
    assert rest("PUT", f"{V2}/{T}/em").status_code == 204
    r = rest("GET", f"{V2}/{T}/em/examinemessage", initialPosition="earliest")
    assert reason_of(r, 412) == "Could not examine messages due to the total message is zero"
    r = run_proc("produce", "em", "-m", "m1", "-m", "m2", "-m", "m3", "-db")
    assert r.returncode == 0, r.stderr
    def examine(pos, n):
        return rest("GET", f"{V2}/{T}/em/examinemessage", initialPosition=pos,
                    messagePosition=str(n))
    assert examine("earliest", 1).content == b"m1"
    assert examine("latest", 1).content == b"m3"
    assert examine("latest", 2).content == b"m2"
    mid = examine("earliest", 2).headers["X-Pulsar-Message-ID"]
    ledger, entry = mid.split(":")
    got = rest("GET", f"{V2}/{T}/em/ledger/{ledger}/entry/{entry}")
    assert got.status_code == 200 and got.content == b"m2"
    assert got.headers["X-Pulsar-Message-ID"] == mid
    reason_of(rest("GET", f"{V2}/{T}/em/ledger/{ledger}/entry/99"), 404)


# -- deleting topics ----------------------------------------------------------------------------------
def test_deleting_a_topic_takes_its_idle_subscriptions_along(rest, run_proc):
    """Pulsar deletes a topic with subscriptions when no consumer is connected (serve said 409
    'has 1 subscription(s)'); a connected consumer makes it 412; a partitioned topic is deleted
    with delete-partitioned-topic, not as a topic (409)."""
    produce(run_proc, "dl", "a")
    assert rest("PUT", f"{V2}/{T}/dl/subscription/s", {"ledgerId": -1, "entryId": -1}
                ).status_code == 204
    assert rest("DELETE", f"{V2}/{T}/dl").status_code == 204
    assert rest("GET", f"{V2}/{T}").json() == []
    reason_of(rest("DELETE", f"{V2}/{T}/dl"), 404)
    produce(run_proc, "busy", "a")
    r = run_proc("receive", "busy", "-s", "s", "-p", "Earliest", "-n", "1", "--lease", "10m")
    assert r.returncode == 0, r.stderr
    text = reason_of(rest("DELETE", f"{V2}/{T}/busy"), 412)
    assert text == "Topic has 1 client connected Including 1 consumers, 0 producers, and 0 replicators."
    assert rest("DELETE", f"{V2}/{T}/busy", force="true").status_code == 204
    assert rest("PUT", f"{V2}/{T}/pd/partitions", 2).status_code == 204
    assert rest("PUT", f"{V2}/{T}/pd/subscription/s", {"ledgerId": -1, "entryId": -1}
                ).status_code == 204
    assert reason_of(rest("DELETE", f"{V2}/{T}/pd"), 409).endswith(
        "please call delete-partitioned-topic.")
    assert rest("DELETE", f"{V2}/{T}/pd/partitions").status_code == 204
    assert rest("GET", f"{V2}/{T}/partitioned").json() == []


# -- schemas -----------------------------------------------------------------------------------------
def test_a_schema_compatibility_check_is_answered_202(rest):
    """Pulsar answers POST .../compatibility with 202 Accepted and the answer (serve: 200)."""
    path = f"{V2}/schemas/public/default/sc"
    assert rest("POST", path + "/schema", {"type": "STRING", "schema": ""}).status_code == 200
    r = rest("POST", path + "/compatibility", {"type": "STRING", "schema": ""})
    assert r.status_code == 202
    assert r.json() == {"isCompatibility": True, "schemaCompatibilityStrategy": "FULL"}


# -- reset-cursor -------------------------------------------------------------------------------------
def test_reset_cursor_excluding_the_position_starts_after_it(rest, run_proc):
    """pulsar-admin reset-cursor -m ID -e sends ResetCursorData with "excluded": true: the
    subscription starts at the entry after ID (serve ignored it and started at ID)."""
    r = run_proc("produce", "rx", "-m", "a", "-m", "b", "-m", "c", "-db")
    assert r.returncode == 0, r.stderr
    assert rest("PUT", f"{V2}/{T}/rx/subscription/s", {"ledgerId": -1, "entryId": -1}
                ).status_code == 204
    last = rest("GET", f"{V2}/{T}/rx/lastMessageId").json()
    first = {"ledgerId": last["ledgerId"], "entryId": last["entryId"] - 2}
    assert rest("POST", f"{V2}/{T}/rx/subscription/s/resetcursor",
                {**first, "excluded": True}).status_code == 204
    assert rest("GET", f"{V2}/{T}/rx/subscription/s/position/1").content == b"b"
    assert sub_stats(rest, "rx", "s")["msgBacklog"] == 2
    assert rest("POST", f"{V2}/{T}/rx/subscription/s/resetcursor",
                {**first, "excluded": False}).status_code == 204
    assert rest("GET", f"{V2}/{T}/rx/subscription/s/position/1").content == b"a"


# -- backlog quotas -----------------------------------------------------------------------------------
def test_backlog_quotas_over_rest(rest):
    """GET backlogQuotaMap, POST and DELETE backlogQuota?backlogQuotaType=T, as pulsar-admin
    namespaces get-backlog-quotas / set-backlog-quota / remove-backlog-quota call them (serve had
    none of them); a size quota that does not fit in the retention is Pulsar's 412."""
    ns = f"{V2}/namespaces/public/default"
    assert rest("GET", ns + "/backlogQuotaMap").json() == {}
    q = {"limit": 1048576, "limitSize": 1048576, "limitTime": -1, "policy": "producer_exception"}
    r = rest("POST", ns + "/backlogQuota", q, backlogQuotaType="destination_storage")
    assert r.status_code == 204, r.text
    age = {"limitSize": -1, "limitTime": 3600, "policy": "producer_request_hold"}
    assert rest("POST", ns + "/backlogQuota", age, backlogQuotaType="message_age"
                ).status_code == 204
    assert rest("GET", ns + "/backlogQuotaMap").json() == {
        "destination_storage": q, "message_age": {"limit": -1, **age}}
    assert rest("GET", ns).json()["backlog_quota_map"]["destination_storage"] == q
    assert rest("DELETE", ns + "/backlogQuota").status_code == 204   # destination_storage
    assert list(rest("GET", ns + "/backlogQuotaMap").json()) == ["message_age"]
    assert rest("DELETE", ns + "/backlogQuota", backlogQuotaType="message_age"
                ).status_code == 204
    assert rest("GET", ns + "/backlogQuotaMap").json() == {}
    assert rest("POST", ns + "/retention", {"retentionTimeInMinutes": 60,
                                            "retentionSizeInMB": 1}).status_code == 204
    text = reason_of(rest("POST", ns + "/backlogQuota", q), 412)
    assert text.startswith("Backlog Quota exceeds configured retention quota for namespace.")
    assert rest("GET", ns + "/backlogQuotaMap").json() == {}


def test_partitioned_internal_stats(rest, run_proc):
    """GET .../partitioned-internalStats (pulsar-admin partitioned-stats-internal; serve had no
    such route): the metadata and each partition's internal stats, Pulsar's 404 for a topic
    that is not partitioned."""
    assert rest("PUT", f"{V2}/{T}/pi/partitions", 2).status_code == 204
    produce(run_proc, "pi", "a", "b")
    doc = rest("GET", f"{V2}/{T}/pi/partitioned-internalStats").json()
    assert doc["metadata"] == {"partitions": 2, "deleted": False}
    parts = doc["partitions"]
    assert sorted(parts) == [f"persistent://public/default/pi-partition-{i}" for i in (0, 1)]
    assert sum(p["numberOfEntries"] for p in parts.values()) == 2
    assert all(p["compactedLedger"]["ledgerId"] == -1 for p in parts.values())
    produce(run_proc, "np", "a")
    assert reason_of(rest("GET", f"{V2}/{T}/np/partitioned-internalStats"), 404) == (
        "Partitioned Topic persistent://public/default/np not found")


def test_deleting_a_missing_subscription_names_it(rest, run_proc):
    """Pulsar's 404 names the subscription and the topic (serve: 'Subscription not found')."""
    produce(run_proc, "us", "a")
    text = reason_of(rest("DELETE", f"{V2}/{T}/us/subscription/gone"), 404)
    assert text == "Subscription gone not found for topic persistent://public/default/us"


def test_partitioned_stats_add_up_the_subscriptions_counters(rest, run_proc):
    """A partitioned topic's subscription adds up its partitions' msgBacklogNoDelayed and
    totalMsgExpired, as SubscriptionStatsImpl.add does (serve took the first partition's)."""
    assert rest("PUT", f"{V2}/{T}/pe/partitions", 2).status_code == 204
    assert rest("PUT", f"{V2}/{T}/pe/subscription/s", {"ledgerId": -1, "entryId": -1}
                ).status_code == 204
    produce(run_proc, "pe-partition-0", "a", "b")
    produce(run_proc, "pe-partition-1", "c")
    sub = rest("GET", f"{V2}/{T}/pe/partitioned-stats").json()["subscriptions"]["s"]
    assert (sub["msgBacklog"], sub["msgBacklogNoDelayed"], sub["totalMsgExpired"]) == (3, 3, 0)
    assert rest("POST", f"{V2}/{T}/pe/subscription/s/expireMessages/0").status_code == 204
    sub = rest("GET", f"{V2}/{T}/pe/partitioned-stats").json()["subscriptions"]["s"]
    assert (sub["msgBacklog"], sub["msgBacklogNoDelayed"], sub["totalMsgExpired"]) == (0, 0, 3)
