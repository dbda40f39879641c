"""Tiered storage's transactions (Pulsar's LedgerOffloader, on the broker's side): what
pulsarctl/offload.py reads and commits while it writes the Parquet files outside any
transaction. Each method is one transaction running offload.py's body for it; each names its
topic first and is routed, so a non-persistent topic is refused by its own store's answer."""
from __future__ import annotations

from pulsarctl import offload
from pulsarctl.broker.admin.base import Noun
from pulsarctl.broker.nonpersistent import routed
from pulsarctl.broker.targets import topic_name


class Offloader(Noun):
    __slots__ = ()

    @routed
    def plan(self, topic, size_threshold: int | None, older_than_ms: int | None) -> list:
        """[(partition name, managed ledger id, ledger rows to offload)], oldest first."""
        return self._broker._read(offload.plan, topic_name(topic), size_threshold,
                                  older_than_ms)

    @routed
    def ledger_table(self, topic, ml_id: int, ledger_id: int):
        """(Arrow table, (first, last publish time)) of one closed ledger of the partition, or
        None when it is no longer there to offload."""
        return self._broker._read(offload.table_of, topic_name(topic), ml_id, ledger_id)

    @routed
    def commit(self, topic, written: list) -> list[dict]:
        """One write transaction: each written file's ledger row names it and the ledger's
        entries leave the store (offload.commit_files). topic: the one offloaded."""
        return self._broker._write(offload.commit_files, written)

    @routed
    def status(self, topic) -> list[dict]:
        """Per partition: offloaded ledgers and what stays local."""
        return self._broker._read(offload.status_of, topic_name(topic))

    @routed
    def manifest(self, topic, directory: str) -> dict | None:
        """The manifest document of a partition's files in directory; None when it is gone."""
        return self._broker._read(offload.manifest_doc, str(topic_name(topic)), directory)

    @routed
    def files(self, part_names: list[str]) -> dict:
        """{partition name: [(ledger id, first offset, entries, file)]} of offloaded ledgers."""
        return self._broker._read(offload.offloaded_files, list(part_names))
