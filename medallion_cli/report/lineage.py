"""OpenLineage run events, through openlineage-python and the transport the profile sets
(`lineage:` in a target: http, file, console, kafka...).

Each seed and model run is a job run: START when it begins, COMPLETE or FAIL when it ends, with
its input and output datasets, their schemas and the column lineage sqlglot finds (columns.py).
Under --watch, a streaming model's query is one long run: a RUNNING event every `batch_every`
micro-batches (with the rows they wrote), COMPLETE when the watch stops. Every run names the
command's run (the event log's run id) as its parent. Events are sent by a background thread, so
a slow or absent receiver never holds up a build; a failure to send is reported once.
"""

from __future__ import annotations

import datetime as dt
import queue
import threading
import uuid
from typing import TYPE_CHECKING, Any, Callable
from urllib.parse import urlparse

from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import (
    InputDataset,
    Job,
    OutputDataset,
    Run,
    RunEvent,
    RunState,
)
from openlineage.client.facet_v2 import (
    JobFacet,
    OutputDatasetFacet,
    column_lineage_dataset,
    error_message_run,
    job_type_job,
    output_statistics_output_dataset,
    parent_run,
    processing_engine_run,
    schema_dataset,
    sql_job,
)

from .. import __version__
from ..core.project import Project, SourceTable
from ..load.sources import KAFKA_BROKERS
from ..run.runner import NodeResult
from .columns import Column, node_columns

if TYPE_CHECKING:
    from ..core.nodes import CompiledNode
    from ..dag.graph import Graph
    from ..engines.base import Engine
    from ..materialize.streaming.tally import BatchReport

PRODUCER = "https://github.com/medallion-lakehouse/medallion"


def dataset_name(location: str) -> tuple[str, str]:
    """(namespace, name) of a table or folder, by OpenLineage's naming: `file` and the absolute
    path on a local disk; `scheme://authority` and the path on object storage."""
    parsed = urlparse(location)
    if parsed.scheme in ("", "file"):
        return "file", parsed.path if parsed.scheme else location
    return f"{parsed.scheme}://{parsed.netloc}", parsed.path.lstrip("/")


def source_dataset(source: SourceTable) -> tuple[str, str]:
    if source.format == "kafka":
        brokers = source.options.get(KAFKA_BROKERS, "").split(",")[0]
        topic = next((source.options[k] for k in ("subscribe", "subscribePattern", "assign")
                      if k in source.options), source.name)
        return f"kafka://{brokers}", str(topic)
    return dataset_name(str(source.path))


class LineageEmitter:
    """Sends one run's OpenLineage events."""

    def __init__(self, config: dict[str, Any], engine: Engine, project: Project, graph: Graph,
                 parent_run_id: str, command: str,
                 on_problem: Callable[[str], None] = lambda message: None):
        self.client = OpenLineageClient(config={"transport": config["transport"]})
        self.namespace = config.get("namespace") or project.name
        self.batch_every = config.get("batch_every", 1)
        self.engine = engine
        self.project = project
        self.graph = graph
        self.parent = parent_run.ParentRunFacet(
            run=parent_run.Run(runId=str(uuid.UUID(parent_run_id))),
            job=parent_run.Job(namespace=self.namespace, name=f"{project.name}.{command}"))
        self.on_problem = on_problem
        self.problem: str | None = None
        self.runs: dict[str, str] = {}  # node -> its run id, while it runs
        self.watched: dict[str, int] = {}  # streaming node under --watch -> batches seen
        self.columns: dict[str, list[Column]] | None = None  # found once, on the first event
        # (state, node, run id, facts) to send; None: the last
        self.queued: queue.Queue[tuple[RunState, str, str, dict[str, Any]] | None] = queue.Queue()
        self.sender = threading.Thread(target=self._send_queued, daemon=True,
                                       name="medallion-lineage")
        self.sender.start()

    # What a run reports.

    def started(self, name: str) -> None:
        if name in self.graph.nodes:
            self.runs[name] = str(uuid.uuid4())
            self.queued.put((RunState.START, name, self.runs[name], {}))

    def finished(self, result: NodeResult) -> None:
        run_id = self.runs.pop(result.name, None)
        if run_id is None:  # a test, or a node skipped before it began
            return
        state = RunState.FAIL if result.failed else RunState.COMPLETE
        self.queued.put((state, result.name, run_id, {"rows": result.rows,
                                                      "files": result.files_added,
                                                      "error": result.message if result.failed
                                                      else None}))

    def batch(self, report: BatchReport) -> None:
        """A micro-batch under --watch: the query's run goes on (RUNNING)."""
        seen = self.watched.get(report.model, 0) + 1
        self.watched[report.model] = seen
        run_id = self.runs.setdefault(f"watch:{report.model}", str(uuid.uuid4()))
        if seen % self.batch_every == 0:
            self.queued.put((RunState.RUNNING, report.model, run_id,
                             {"rows": report.rows, "files": report.files_added}))

    def close(self, timeout: float = 30) -> None:
        """End the watched queries' runs, send what is queued, and stop."""
        for model in self.watched:
            self.queued.put((RunState.COMPLETE, model, self.runs.pop(f"watch:{model}"), {}))
        self.queued.put(None)
        self.sender.join(timeout)
        self.client.close(timeout)

    # How it is sent.

    def _send_queued(self) -> None:
        while (item := self.queued.get()) is not None:
            try:
                self.client.emit(self._event(*item))
            except Exception as exc:  # the build goes on; lineage misses this event
                if self.problem is None:
                    self.problem = f"OpenLineage events were not sent: {exc}"
                    self.on_problem(self.problem)

    def _event(self, state: RunState, name: str, run_id: str, facts: dict[str, Any]) -> RunEvent:
        if self.columns is None:
            self.columns = node_columns(self.project, self.graph, self._table_columns)
        node = self.graph.nodes[name]
        streaming = node.config.materialized == "streaming"
        run_facets = {"parent": self.parent, "processing_engine":
                      processing_engine_run.ProcessingEngineRunFacet(
                          version=__version__, name="medallion",
                          openlineageAdapterVersion=__version__)}
        if facts.get("error"):
            run_facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(
                message=facts["error"], programmingLanguage="SQL")
        job_facets: dict[str, JobFacet] = {"jobType": job_type_job.JobTypeJobFacet(
            processingType="STREAMING" if streaming else "BATCH", integration="SPARK",
            jobType="MODEL" if node.file.kind == "model" else "SEED")}
        if node.shown_sql is not None:  # (a seed has none)
            job_facets["sql"] = sql_job.SQLJobFacet(query=node.shown_sql, dialect="spark")
        return RunEvent(
            eventType=state, eventTime=dt.datetime.now(dt.timezone.utc).isoformat(),
            run=Run(runId=run_id, facets=run_facets),
            job=Job(namespace=self.namespace, name=f"{self.project.name}.{name}",
                    facets=job_facets),
            inputs=self._inputs(node), outputs=self._outputs(node, facts), producer=PRODUCER)

    def _table_columns(self, path: str) -> dict[str, str] | None:
        try:
            return self.engine.table_columns(path)
        except Exception:  # a table being written meanwhile: its columns are not known now
            return None

    def _relations(self) -> dict[str, tuple[str, str]]:
        """SQL relation -> dataset: models and seeds by their tables, sources by theirs."""
        found = {name: dataset_name(self.project.table_path(n.file))
                 for name, n in self.graph.nodes.items() if n.config.materialized != "view"}
        found.update({s.relation: source_dataset(s) for s in self.project.sources.values()})
        return found

    def _inputs(self, node: CompiledNode) -> list[InputDataset]:
        """The tables and sources the node reads, through views (which have no table)."""
        inputs, refs, sources, seen = [], list(node.refs), list(node.sources), set()
        while refs:
            name = refs.pop(0)
            parent = self.graph.nodes[name]
            if name in seen:
                continue
            seen.add(name)
            if parent.config.materialized == "view":
                refs += parent.refs
                sources += parent.sources
                continue
            namespace, table = dataset_name(self.project.table_path(parent.file))
            inputs.append(InputDataset(namespace, table, facets=self._schema(name)))
        for key in dict.fromkeys(sources):
            source = self.project.sources[key]
            inputs.append(InputDataset(*source_dataset(source), facets=self._schema(
                source.relation)))
        return inputs

    def _schema(self, name: str) -> dict[str, Any]:
        columns = (self.columns or {}).get(name)
        if not columns:
            return {}
        return {"schema": schema_dataset.SchemaDatasetFacet(fields=[
            schema_dataset.SchemaDatasetFacetFields(name=c.name, type=c.type or None)
            for c in columns])}

    def _outputs(self, node: CompiledNode, facts: dict[str, Any]) -> list[OutputDataset]:
        if node.config.materialized == "view":
            return []
        namespace, table = dataset_name(self.project.table_path(node.file))
        facets = self._schema(node.name)
        relations = self._relations()
        lineage = {}
        for column in (self.columns or {}).get(node.name, []):
            fields = []
            for ref in column.lineage:
                relation, _, field = ref.rpartition(".")
                if relation in relations:
                    fields.append(column_lineage_dataset.InputField(*relations[relation], field))
            if fields:
                lineage[column.name] = column_lineage_dataset.Fields(inputFields=fields)
        if lineage:
            facets["columnLineage"] = column_lineage_dataset.ColumnLineageDatasetFacet(
                fields=lineage)
        statistics: dict[str, OutputDatasetFacet] = {}
        if facts.get("rows") is not None:
            statistics["outputStatistics"] = \
                output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
                    rowCount=facts["rows"], fileCount=facts.get("files"))
        return [OutputDataset(namespace, table, facets=facets, outputFacets=statistics)]
