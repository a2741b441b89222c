"""A Hive Metastore service's Thrift API as the catalog (metastore: thrift://host:port), with no
JVM: how the embedded engine, whose Spark has no Delta catalog, names its tables where Spark,
Trino and other engines find them.

A table is stored as Delta for Spark stores one: an external table (dropping it never deletes
data) whose provider is delta and whose serde `path` is the table's folder, so a Spark with
Delta's catalog reads it by name, its schema from the Delta log; Trino's and other readers take
the location. Its docs are the Delta table's own description and column comments, as Delta for
Spark's COMMENT ON TABLE writes them, so every Delta reader sees them. A view is stored as Hive
stores one: its SQL (naming the catalog's relations) and its columns with their types.
(pymetastore's bindings of Hive 3's interface.)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..core.errors import MedallionError
from ..core.locations import is_remote
from .catalog import OWNER, Docs, Entry, Registered, ViewColumns
from .deltars import open_table

if TYPE_CHECKING:
    from pymetastore.hive_metastore.ThriftHiveMetastore import Client

KINDS = {"MANAGED_TABLE": "MANAGED", "EXTERNAL_TABLE": "EXTERNAL", "VIRTUAL_VIEW": "VIEW"}
SECONDS = 30  # a call's answer, at most


def _uri(path: str) -> str:
    return path if is_remote(path) else "file:" + path


class ThriftCatalog:
    def __init__(self, uri: str, profiles_file: str | None = None) -> None:
        self.uri = uri
        host, _, port = uri.removeprefix("thrift://").rstrip("/").rpartition(":")
        self.host, self.port, self.profiles_file = host, int(port), profiles_file

    @contextmanager
    def _client(self) -> Iterator[Client]:
        """A connection for a few calls; one line when the service does not answer."""
        from pymetastore.hive_metastore import ThriftHiveMetastore
        from thrift.protocol import TBinaryProtocol
        from thrift.Thrift import TException
        from thrift.transport import TSocket, TTransport

        # thrift logs a refused connection itself (Python's last-resort handler prints it):
        # the error below says it, once
        logging.getLogger("thrift.transport.TSocket").setLevel(logging.CRITICAL)
        socket = TSocket.TSocket(self.host, self.port)
        socket.setTimeout(SECONDS * 1000)
        transport = TTransport.TBufferedTransport(socket)
        try:
            transport.open()
        except TTransport.TTransportException as exc:
            raise MedallionError(
                f"the Hive Metastore at {self.uri} did not answer ({exc})",
                path=self.profiles_file,
                hint="start it, or fix the target's metastore address") from exc
        try:
            yield ThriftHiveMetastore.Client(TBinaryProtocol.TBinaryProtocol(transport))
        except TException as exc:
            # Its exceptions are frozen: one leaving this generator as it is would fail on its
            # traceback's assignment ("can't modify immutable instance"), hiding its message.
            said, hint = refusal(self.uri, exc)
            raise MedallionError(said, hint=hint) from None
        finally:
            transport.close()

    def lookup(self, schema: str, table: str) -> Registered:
        from pymetastore.hive_metastore.ttypes import NoSuchObjectException

        with self._client() as client:
            try:
                return _entry(client.get_table(schema, table))
            except NoSuchObjectException:
                return None

    def entries(self) -> list[Entry]:
        with self._client() as client:
            return [_entry(found) for schema in client.get_all_databases()
                    for found in client.get_table_objects_by_name(
                        schema, client.get_all_tables(schema))]

    def drop(self, schema: str, table: str, view: bool) -> None:
        with self._client() as client:
            client.drop_table(schema, table, False)  # an external table's data stays

    def register_table(self, schema: str, table: str, path: str, new: bool,
                       docs: Docs) -> None:
        from pymetastore.hive_metastore.ttypes import SerDeInfo

        if new:
            serde = SerDeInfo(parameters={"path": _uri(path)})
            # EXTERNAL: without the parameter Hive 3 keeps it as a managed table whatever its
            # type says; DO_NOT_UPDATE_STATS: no file counts, which the next commit makes stale
            self._create(schema, table, "EXTERNAL_TABLE", [], serde, _uri(path), {
                "EXTERNAL": "TRUE", "spark.sql.sources.provider": "delta",
                "DO_NOT_UPDATE_STATS": "true"})
        if docs.comment or docs.columns:
            _describe(path, docs)

    def register_view(self, schema: str, table: str, sql: str, columns: ViewColumns,
                      docs: Docs, warehouse: str) -> None:
        from pymetastore.hive_metastore.ttypes import FieldSchema, SerDeInfo

        fields = [FieldSchema(name, kind, docs.columns.get(name)) for name, kind in columns()]
        self._create(schema, table, "VIRTUAL_VIEW", fields, SerDeInfo(parameters={}), None,
                     {OWNER: warehouse, **({"comment": docs.comment} if docs.comment else {})},
                     sql)

    def _create(self, schema: str, table: str, kind: str, fields: list[Any], serde: Any,
                location: str | None, parameters: dict[str, str], sql: str | None = None
                ) -> None:
        """Create the entry (and its schema when missing); a view there is replaced in one
        call, so a reader finds the old view or the new one."""
        from pymetastore.hive_metastore.ttypes import (
            AlreadyExistsException,
            Database,
            NoSuchObjectException,
            StorageDescriptor,
            Table,
        )

        entry = Table(tableName=table, dbName=schema, owner="medallion",
                      createTime=int(time.time()), lastAccessTime=0, retention=0,
                      sd=StorageDescriptor(cols=fields, location=location, serdeInfo=serde,
                                           compressed=False, numBuckets=-1, bucketCols=[],
                                           sortCols=[], parameters={}),
                      partitionKeys=[], parameters=parameters, tableType=kind,
                      viewOriginalText=sql, viewExpandedText=sql)
        with self._client() as client:
            try:
                client.get_database(schema)
            except NoSuchObjectException:
                try:
                    client.create_database(Database(name=schema, parameters={}))
                except AlreadyExistsException:
                    pass  # another node of the build, registering in parallel, made it
            try:
                client.get_table(schema, table)
            except NoSuchObjectException:
                client.create_table(entry)
            else:
                client.alter_table(schema, table, entry)


def refusal(uri: str, exc: Exception) -> tuple[str, str]:
    """What the service said, one line, and what to do."""
    # (a Thrift exception's str() is its repr: its own words are its message)
    lines = (getattr(exc, "message", None) or str(exc)).strip().splitlines()
    said = lines[0] if lines else type(exc).__name__
    hint = ("the metastore service itself opens each table's folder: give it that store's "
            "file system (for S3: hadoop-aws on its class path, fs.s3.impl and fs.s3a.* in "
            "its metastore-site.xml)" if "No FileSystem for scheme" in said
            else "its own log says more")
    return f"the Hive Metastore at {uri} refused: {said}", hint


def _entry(found: Any) -> Entry:
    """An entry as Spark's Hive client reads it: a Delta table's folder is its serde path (the
    storage location may be a placeholder), else the storage location."""
    serde = (found.sd.serdeInfo.parameters or {}) if found.sd and found.sd.serdeInfo else {}
    return Entry(found.dbName, found.tableName, KINDS.get(found.tableType, found.tableType),
                 serde.get("path") or (found.sd.location if found.sd else None),
                 (found.parameters or {}).get(OWNER))


def _describe(path: str, docs: Docs) -> None:
    """The Delta table's description and column comments, each written (a commit with no
    rows) only when it changed."""
    table = open_table(path)
    if docs.comment and table.metadata().description != docs.comment:
        table.alter.set_table_description(docs.comment)
        table = open_table(path)
    for field in table.schema().fields:
        text = docs.columns.get(field.name)
        if text and field.metadata.get("comment") != text:
            table.alter.set_column_metadata(field.name, {"comment": text})
            table = open_table(path)
