"""The admin REST API (pulsarctl/rest/) against a real server on 127.0.0.1: Pulsar's paths,
JSON shapes and status codes, as pulsar-admin and the clients' HTTP lookup call them; and a
change made over REST is what the command line sees, and the other way round."""
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

        def __call__(self, method, path, body=None, raw=None, **params):
            data = raw if raw is not None else (None if body is None else json.dumps(body))
            headers = {"Content-Type": "application/json"} if data is not None else {}
            return session.request(method, server.url + path, data=data, headers=headers,
                                   params=params or None, timeout=30)
    yield Client()
    session.close()
    server.stop()


def reason_of(r, status):
    assert r.status_code == status, (r.status_code, r.text)
    doc = r.json()
    assert set(doc) == {"reason"} and doc["reason"], doc
    return doc["reason"]


def cli_json(run_proc, *args):
    r = run_proc(*args, "-o", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


# -- lookup and clusters ------------------------------------------------------------------------
def test_lookup_answers_the_broker_urls(rest):
    r = rest("GET", "/lookup/v2/topic/persistent/public/default/t1")
    assert r.status_code == 200
    doc = r.json()
    assert doc["brokerUrl"] == "pulsar://127.0.0.1:6650"
    assert doc["httpUrl"] == rest.url
    reason_of(rest("GET", "/lookup/v2/topic/persistent/public/nope/t1"), 404)


def test_partitioned_metadata_is_what_a_client_asks_first(rest):
    assert rest("GET", f"{V2}/{T}/t1/partitions").json()["partitions"] == 0
    assert rest("PUT", f"{V2}/{T}/p1/partitions", 3).status_code == 204
    assert rest("GET", f"{V2}/{T}/p1/partitions").json() == {"partitions": 3, "deleted": False}
    reason_of(rest("PUT", f"{V2}/{T}/p1/partitions", 3), 409)
    assert rest("POST", f"{V2}/{T}/p1/partitions", 5).status_code == 204
    assert rest("GET", f"{V2}/{T}/p1/partitions").json()["partitions"] == 5
    assert rest("GET", f"{V2}/{T}/partitioned").json() == ["persistent://public/default/p1"]
    reason_of(rest("PUT", f"{V2}/{T}/p2/partitions", 0), 406)
    reason_of(rest("POST", f"{V2}/{T}/nope/partitions", 2), 409)  # Pulsar's CONFLICT
    assert rest("DELETE", f"{V2}/{T}/p1/partitions").status_code == 204
    reason_of(rest("DELETE", f"{V2}/{T}/p1/partitions"), 404)


def test_clusters(rest):
    assert rest("GET", f"{V2}/clusters").json() == ["standalone"]
    doc = rest("GET", f"{V2}/clusters/standalone").json()
    assert doc["serviceUrl"] == rest.url and doc["brokerServiceUrl"] == "pulsar://127.0.0.1:6650"
    reason_of(rest("GET", f"{V2}/clusters/other"), 404)


# -- tenants and namespaces -----------------------------------------------------------------------
def test_tenants(rest, run_proc):
    assert rest("GET", f"{V2}/tenants").json() == ["public"]
    r = rest("PUT", f"{V2}/tenants/acme", {"adminRoles": ["ops"], "allowedClusters": ["standalone"]})
    assert r.status_code == 204 and r.text == ""
    assert rest("GET", f"{V2}/tenants/acme").json() == {"adminRoles": ["ops"],
                                                        "allowedClusters": ["standalone"]}
    reason_of(rest("PUT", f"{V2}/tenants/acme", {}), 409)
    reason_of(rest("GET", f"{V2}/tenants/nope"), 404)
    reason_of(rest("PUT", f"{V2}/tenants/x", {"allowedClusters": ["elsewhere"]}), 412)
    assert "acme" in cli_json(run_proc, "tenants", "list")
    assert rest("PUT", f"{V2}/namespaces/acme/ns").status_code == 204
    reason_of(rest("DELETE", f"{V2}/tenants/acme"), 409)
    assert rest("DELETE", f"{V2}/tenants/acme", force="true").status_code == 204
    reason_of(rest("DELETE", f"{V2}/tenants/acme"), 404)


def test_namespaces_and_their_policies(rest, run_proc):
    assert rest("GET", f"{V2}/namespaces/public").json() == ["public/default"]
    assert rest("PUT", f"{V2}/namespaces/public/ns1").status_code == 204
    reason_of(rest("PUT", f"{V2}/namespaces/public/ns1"), 409)
    reason_of(rest("PUT", f"{V2}/namespaces/nope/ns1"), 404)
    ns = f"{V2}/namespaces/public/ns1"
    # Not set: 200 and no body, as Pulsar answers (pulsar-admin prints null).
    r = rest("GET", ns + "/messageTTL")
    assert r.status_code == 200 and r.content == b""
    assert rest("POST", ns + "/messageTTL", 120).status_code == 204
    assert rest("GET", ns + "/messageTTL").json() == 120
    assert rest("POST", ns + "/deduplication", True).status_code == 204
    assert rest("GET", ns + "/deduplication").json() is True
    ret = {"retentionTimeInMinutes": 60, "retentionSizeInMB": 10}
    assert rest("POST", ns + "/retention", ret).status_code == 204
    assert rest("GET", ns + "/retention").json() == ret
    reason_of(rest("POST", ns + "/retention", {"retentionTimeInMinutes": 0,
                                              "retentionSizeInMB": 10}), 400)
    reason_of(rest("POST", ns + "/messageTTL", "soon"), 400)
    assert rest("GET", ns + "/permissions").json() == {}
    assert rest("POST", ns + "/permissions/alice", ["produce", "consume"]).status_code == 204
    assert rest("GET", ns + "/permissions").json() == {"alice": ["produce", "consume"]}
    reason_of(rest("POST", ns + "/permissions/bob", ["fly"]), 400)
    assert rest("DELETE", ns + "/permissions/alice").status_code == 204
    assert rest("GET", ns + "/permissions").json() == {}
    reason_of(rest("GET", f"{V2}/namespaces/public/nope/permissions"), 404)
    pol = rest("GET", ns).json()
    assert pol["message_ttl_in_seconds"] == 120 and pol["deduplicationEnabled"] is True
    # What the command line sees, and the other way round.
    assert cli_json(run_proc, "namespaces", "get-message-ttl", "public/ns1") == 120
    r = run_proc("namespaces", "set-message-ttl", "public/ns1", "-ttl", "300")
    assert r.returncode == 0, r.stderr
    assert rest("GET", ns + "/messageTTL").json() == 300
    assert rest("DELETE", ns + "/messageTTL").status_code == 204
    r = rest("GET", ns + "/messageTTL")
    assert r.status_code == 200 and r.content == b""
    assert rest("DELETE", ns).status_code == 204
    reason_of(rest("GET", ns + "/messageTTL"), 404)


# -- topics -----------------------------------------------------------------------------------------
def test_topic_create_list_delete(rest, run_proc):
    assert rest("PUT", f"{V2}/{T}/a").status_code == 204
    reason_of(rest("PUT", f"{V2}/{T}/a"), 409)
    assert rest("GET", f"{V2}/{T}").json() == ["persistent://public/default/a"]
    assert rest("GET", f"{V2}/namespaces/public/default/topics").json() == [
        "persistent://public/default/a"]
    r = run_proc("produce", "b", "-m", "x")
    assert r.returncode == 0, r.stderr
    assert sorted(rest("GET", f"{V2}/{T}").json()) == ["persistent://public/default/a",
                                                     "persistent://public/default/b"]
    assert rest("DELETE", f"{V2}/{T}/a").status_code == 204
    reason_of(rest("DELETE", f"{V2}/{T}/a"), 404)
    reason_of(rest("GET", f"{V2}/persistent/public/nope"), 404)


def test_stats_and_subscriptions(rest, run_proc):
    r = run_proc("produce", "s1", "-m", "a", "-m", "b", "-m", "c")
    assert r.returncode == 0, r.stderr
    assert rest("PUT", f"{V2}/{T}/s1/subscription/sub", {"ledgerId": -1, "entryId": -1}
                ).status_code == 204
    reason_of(rest("PUT", f"{V2}/{T}/s1/subscription/sub"), 409)
    assert rest("GET", f"{V2}/{T}/s1/subscriptions").json() == ["sub"]
    st = rest("GET", f"{V2}/{T}/s1/stats").json()
    assert st["msgInCounter"] == 3 and st["subscriptions"]["sub"]["msgBacklog"] == 3
    internal = rest("GET", f"{V2}/{T}/s1/internalStats").json()
    assert "sub" in internal["cursors"]
    assert rest("POST", f"{V2}/{T}/s1/subscription/sub/skip/1").status_code == 204
    assert rest("GET", f"{V2}/{T}/s1/stats").json()["subscriptions"]["sub"]["msgBacklog"] == 2
    # The command line sees the skip.
    doc = cli_json(run_proc, "topics", "stats", "s1")
    assert doc["subscriptions"]["sub"]["msgBacklog"] == 2
    assert rest("POST", f"{V2}/{T}/s1/subscription/sub/skip_all").status_code == 204
    assert rest("GET", f"{V2}/{T}/s1/stats").json()["subscriptions"]["sub"]["msgBacklog"] == 0
    assert rest("POST", f"{V2}/{T}/s1/subscription/sub/resetcursor/0").status_code == 204
    assert rest("GET", f"{V2}/{T}/s1/stats").json()["subscriptions"]["sub"]["msgBacklog"] == 3
    last = rest("GET", f"{V2}/{T}/s1/lastMessageId").json()
    assert set(last) == {"ledgerId", "entryId", "partitionIndex"} and last["partitionIndex"] == -1
    assert rest("POST", f"{V2}/{T}/s1/subscription/sub/resetcursor", last).status_code == 204
    assert rest("GET", f"{V2}/{T}/s1/stats").json()["subscriptions"]["sub"]["msgBacklog"] == 1
    assert rest("POST", f"{V2}/{T}/s1/subscription/sub/expireMessages/3600").status_code == 204
    assert rest("GET", f"{V2}/{T}/s1/stats").json()["subscriptions"]["sub"]["msgBacklog"] == 1
    reason_of(rest("POST", f"{V2}/{T}/s1/subscription/nope/skip/1"), 404)
    reason_of(rest("GET", f"{V2}/{T}/nope/stats"), 404)
    assert rest("DELETE", f"{V2}/{T}/s1/subscription/sub").status_code == 204
    reason_of(rest("DELETE", f"{V2}/{T}/s1/subscription/sub"), 404)
    assert cli_json(run_proc, "topics", "subscriptions", "s1") == []


def test_deleting_a_subscription_with_a_consumer_is_a_precondition_failure(rest, run_proc):
    r = run_proc("produce", "c1", "-m", "x")
    assert r.returncode == 0, r.stderr
    r = run_proc("receive", "c1", "-s", "sub", "-p", "Earliest", "--lease", "10m", "-n", "1")
    assert r.returncode == 0, r.stderr
    reason_of(rest("DELETE", f"{V2}/{T}/c1/subscription/sub"), 412)
    assert rest("DELETE", f"{V2}/{T}/c1/subscription/sub", force="true").status_code == 204


def test_partitioned_stats_terminate_and_compaction(rest, run_proc):
    assert rest("PUT", f"{V2}/{T}/p/partitions", 2).status_code == 204
    r = run_proc("produce", "p", "-m", "a", "-m", "b")
    assert r.returncode == 0, r.stderr
    doc = rest("GET", f"{V2}/{T}/p/partitioned-stats").json()
    assert doc["metadata"] == {"partitions": 2} and doc["msgInCounter"] == 2
    assert set(doc["partitions"]) == {"persistent://public/default/p-partition-0",
                                      "persistent://public/default/p-partition-1"}
    reason_of(rest("POST", f"{V2}/{T}/p/terminate"), 405)
    ids = rest("POST", f"{V2}/{T}/p/terminate/partitions").json()
    assert len(ids) == 2
    r = run_proc("produce", "k", "-m", "v1", "-k", "a")
    assert r.returncode == 0, r.stderr
    assert rest("PUT", f"{V2}/{T}/k/compaction").status_code == 204
    assert rest("GET", f"{V2}/{T}/k/compaction").json()["status"] == "SUCCESS"
    mid = rest("POST", f"{V2}/{T}/k/terminate").json()
    assert mid == rest("GET", f"{V2}/{T}/k/lastMessageId").json()
    r = run_proc("produce", "k", "-m", "more")
    assert r.returncode != 0  # terminated: the command line is refused too


# -- schemas ---------------------------------------------------------------------------------------
def test_schemas(rest):
    path = f"{V2}/schemas/public/default/sch/schema"
    reason_of(rest("GET", path), 404)
    definition = json.dumps({"type": "record", "name": "R",
                             "fields": [{"name": "a", "type": "int"}]})
    r = rest("POST", path, {"type": "AVRO", "schema": definition, "properties": {"k": "v"}})
    assert r.status_code == 200 and r.json() == {"version": 0}
    doc = rest("GET", path).json()
    assert doc["version"] == 0 and doc["type"] == "AVRO" and doc["data"] == definition
    assert doc["properties"] == {"k": "v"} and isinstance(doc["timestamp"], int)
    assert rest("GET", path + "/0").json()["version"] == 0
    reason_of(rest("GET", path + "/7"), 404)
    reason_of(rest("POST", path, {"type": "STRING"}), 409)
    assert rest("DELETE", path).json() == {"version": 0}
    reason_of(rest("GET", path), 404)


# -- what a bad request gets -------------------------------------------------------------------------
def test_bad_requests_get_pulsar_shaped_errors(rest):
    reason_of(rest("GET", "/admin/v2/nothing/here"), 404)
    reason_of(rest("PATCH", f"{V2}/tenants"), 405)
    reason_of(rest("PUT", f"{V2}/tenants/bad", raw="{not json"), 400)
    reason_of(rest("PUT", f"{V2}/{T}/x/partitions", raw="[1, 2"), 400)
    reason_of(rest("POST", f"{V2}/{T}/x/subscription/s/skip/many"), 400)
    reason_of(rest("POST", f"{V2}/schemas/public/default/x/schema", raw='"text"'), 400)
    # ...and the server still serves.
    assert rest("GET", f"{V2}/tenants").status_code == 200


# -- metrics ---------------------------------------------------------------------------------------
def test_metrics_in_prometheus_text(rest, run_proc):
    r = run_proc("produce", "m", "-m", "a", "-m", "b")
    assert r.returncode == 0, r.stderr
    assert rest("PUT", f"{V2}/{T}/m/subscription/s", {"ledgerId": -1, "entryId": -1}
                ).status_code == 204
    r = rest("GET", "/metrics")
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/plain")
    labels = 'cluster="standalone",namespace="public/default",topic="persistent://public/default/m"'
    lines = r.text.splitlines()
    assert f"pulsar_msg_backlog{{{labels}}} 2" in lines
    assert f"pulsar_in_messages_total{{{labels}}} 2" in lines
    assert f"pulsar_subscriptions_count{{{labels}}} 1" in lines
    assert f'pulsar_subscription_back_log{{{labels},subscription="s"}} 2' in lines
    assert "# TYPE pulsar_msg_backlog gauge" in lines


# -- publishers (issue 27.2) -------------------------------------------------------------------
def test_stats_list_the_connected_producers_as_publishers(rest, store_path):
    import pulsarctl

    client = pulsarctl.Client(store=store_path)
    try:
        p = client.create_producer("pub", producer_name="over-rest", access_mode="Exclusive")
        p.send(b"x")
        [s] = rest("GET", f"{V2}/{T}/pub/stats").json()["publishers"]
        assert (s["producerName"], s["accessMode"], s["clientVersion"]) == (
            "over-rest", "Exclusive", "pulsarctl")
        assert rest("GET", f"{V2}/{T}/pub/stats").json()["topicEpoch"] == 0
        assert rest("PUT", f"{V2}/{T}/ppub/partitions", 2).status_code == 204
        client.create_producer("ppub", producer_name="parted")
        doc = rest("GET", f"{V2}/{T}/ppub/partitioned-stats", perPartition="true").json()
        assert len(doc["publishers"]) == 1 and "producerName" not in doc["publishers"][0]
        assert [[x["producerName"] for x in part["publishers"]]
                for part in doc["partitions"].values()] == [["parted"], ["parted"]]
    finally:
        client.close()
    assert rest("GET", f"{V2}/{T}/pub/stats").json()["publishers"] == []
