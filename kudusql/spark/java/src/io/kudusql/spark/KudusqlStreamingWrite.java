package io.kudusql.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.spark.TaskContext;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.PhysicalWriteInfo;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.connector.write.streaming.StreamingDataWriterFactory;
import org.apache.spark.sql.connector.write.streaming.StreamingWrite;
import org.apache.spark.sql.types.StructType;

import java.io.IOException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@code df.writeStream.format("kudusql")} on the JVM path: an exactly-once Structured
 * Streaming sink over the Arrow stream endpoint, the same protocol and server-side code as
 * the PySpark sink's (wire/stream_sink.py, kudusql/spark/streaming.py).
 *
 * <pre>
 * task of micro-batch N (executor)                 driver, all tasks done
 * put {table, mode, sink: {sink, batch: N,         stream_sink {action: finish, sink,
 *      run, attempt}} + the task's rows as          summaries: the tasks' answers}:
 *      a batch write sends them; the server         the server records the batch as
 *      runs stream_sink.write_batch: the            committed, or failed with the row
 *      batch's record first (committed or           errors (thrown here as a batch
 *      failed: skip, the rows are dropped),         write's, 23505 / 22000), or finds
 *      a replay's rows filtered                     a replay skipped
 * </pre>
 *
 * <p>The sink is named {@code <table>:<Spark query id>} (the query id lives in the
 * checkpoint: a restart is the same sink), the batch is Spark's epoch id, the run is the
 * query run's job group (new at every start), as the PySpark sink names them, so one sink's
 * records are the same whichever path wrote them. A task without rows does not connect.
 */
final class KudusqlStreamingWrite implements StreamingWrite {
    private static final Logger LOG = LoggerFactory.getLogger(KudusqlStreamingWrite.class);

    private final Options options;
    private final StructType schema;
    private final String queryId;

    KudusqlStreamingWrite(Options options, StructType schema, String queryId) {
        this.options = options;
        this.schema = schema;
        this.queryId = queryId;
        // create the progress table once, on the driver (tasks would race to create it)
        Endpoint.call(options.endpoint, request("ensure"));
    }

    private ObjectNode request(String action) {
        return Endpoint.JSON.createObjectNode().put("op", "stream_sink").put("action", action)
                .put("table", options.table);
    }

    @Override
    public StreamingDataWriterFactory createStreamingWriterFactory(PhysicalWriteInfo info) {
        return new Factory(options, schema);
    }

    static final class Factory implements StreamingDataWriterFactory {
        private static final long serialVersionUID = 1L;
        private final Options options;
        private final StructType schema;

        Factory(Options options, StructType schema) {
            this.options = options;
            this.schema = schema;
        }

        @Override
        public DataWriter<InternalRow> createWriter(int partitionId, long taskId, long epochId) {
            TaskContext tc = TaskContext.get();
            String query = tc == null ? null : tc.getLocalProperty("sql.streaming.queryId");
            String run = tc == null ? null : tc.getLocalProperty("spark.jobGroup.id");
            if (query == null || run == null) {
                throw new KudusqlException("0A000", "the kudusql stream sink runs in a "
                        + "Structured Streaming micro-batch only (no query id or run in the task)");
            }
            ObjectNode sink = Endpoint.JSON.createObjectNode()
                    .put("sink", options.table + ":" + query).put("batch", epochId)
                    .put("run", run).put("attempt", tc.attemptNumber());
            return new KudusqlWrite.Writer(options, schema, sink);
        }
    }

    @Override
    public void commit(long epochId, WriterCommitMessage[] messages) {
        ArrayNode summaries = Endpoint.JSON.createArrayNode();
        String sink = null;
        String run = null;
        for (WriterCommitMessage m : messages) {
            if (!(m instanceof KudusqlWrite.Summary s)) {
                continue;
            }
            if (sink == null) {
                sink = s.sink;
                run = s.run;
            }
            if (s.answer == null) {   // no rows: wrote nothing, nothing to report
                continue;
            }
            try {
                summaries.add(Endpoint.JSON.readTree(s.answer));
            } catch (IOException e) {
                throw new KudusqlException("XX000", "a stream task's summary is not JSON: "
                        + e.getMessage());
            }
        }
        if (sink == null) {
            return;   // no task (an empty batch): as the PySpark sink, no record
        }
        ObjectNode req = request("finish").put("mode", options.mode)
                .put("ignore_row_errors", options.ignoreRowErrors);
        req.set("sink", Endpoint.JSON.createObjectNode().put("sink", sink).put("batch", epochId)
                .put("run", run));
        req.set("summaries", summaries);
        JsonNode out = Endpoint.call(options.endpoint, req);
        String message = out.path("message").asText();
        if (out.path("error").asBoolean(false)) {
            throw new KudusqlException(out.path("sqlstate").asText("22000"), message);
        }
        if (out.path("warning").asBoolean(false)) {
            LOG.warn(message);
        } else {
            LOG.info(message);
        }
    }

    @Override
    public void abort(long epochId, WriterCommitMessage[] messages) {
        LOG.warn("kudusql stream into " + options.table + ": batch " + epochId + " aborted; "
                + "rows already written stay applied and a replay of the batch will not apply "
                + "them again");
    }

    @Override
    public String toString() {
        return "KudusqlStreamingWrite(" + options.table + ", query " + queryId + ")";
    }
}
