package io.kudusql.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowStreamWriter;
import org.apache.arrow.vector.types.pojo.Schema;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.write.BatchWrite;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.DataWriterFactory;
import org.apache.spark.sql.connector.write.PhysicalWriteInfo;
import org.apache.spark.sql.connector.write.V1Write;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.connector.write.streaming.StreamingWrite;
import org.apache.spark.sql.execution.arrow.ArrowWriter;
import org.apache.spark.sql.sources.InsertableRelation;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.ArrowUtils;
import org.apache.spark.sql.vectorized.ColumnarBatch;

import java.io.IOException;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * Appends through the endpoint's "put": each task turns its rows into Arrow batches
 * (`batch_rows` rows each) and streams them on one connection; the
 * server inserts or upserts them chunk by chunk and answers a summary (rows, applied,
 * failed per code, the first row errors). As in Kudu, writes are per row and not atomic:
 * when rows fail, the job fails with the counts and examples and the other rows stay
 * applied (unless ignore_row_errors).
 *
 * <p>A batch write is a V1 write ({@link #toInsertableRelation}: the table declares
 * V1_BATCH_WRITE): Spark hands over the DataFrame and {@link BulkPut} runs the job, copying
 * a columnar scan's batches column by column into Arrow ({@link BulkPut.Copier}) where the
 * plan allows it, else each row through Spark's ArrowWriter (compact decimals by
 * {@link DecimalLongWriter}); its tasks' summaries are checked by {@link #commit}. A
 * streaming write ({@link #toStreaming}) is DataSource V2's, by rows.
 */
final class KudusqlWrite implements WriteBuilder, V1Write, BatchWrite {
    private final Options options;
    private final StructType schema;
    private final String queryId;

    KudusqlWrite(Options options, StructType schema, String queryId) {
        this.options = options;
        this.schema = schema;
        this.queryId = queryId;
    }

    @Override
    public Write build() {
        return this;
    }

    @Override
    public BatchWrite toBatch() {
        return this;
    }

    /**
     * {@code df.write.format("kudusql")...save()}: the DataFrame written by {@link BulkPut},
     * then the tasks' summaries checked as a DataSource V2 commit ({@link #commit}).
     */
    @Override
    public InsertableRelation toInsertableRelation() {
        return (Dataset<Row> data, boolean overwrite) -> {
            WriterCommitMessage[] messages;
            try {
                messages = BulkPut.run(options, data);
            } catch (RuntimeException e) {
                abort(null);
                throw e;
            }
            commit(messages);
        };
    }

    /** {@code df.writeStream.format("kudusql")}: {@link KudusqlStreamingWrite}. */
    @Override
    public StreamingWrite toStreaming() {
        return new KudusqlStreamingWrite(options, schema, queryId);
    }

    @Override
    public DataWriterFactory createBatchWriterFactory(PhysicalWriteInfo info) {
        return new Factory(options, schema);
    }

    static final class Summary implements WriterCommitMessage {
        private static final long serialVersionUID = 1L;
        long rows;
        long applied;
        long failed;
        final Map<String, Long> byCode = new TreeMap<>();
        final List<String> examples = new ArrayList<>();
        /**
         * A streaming sink's task: the sink, Spark's run and the server's answer (JSON:
         * the summary with "skipped", "already_applied"; its first 20 row errors), which
         * the driver hands back to the server to finish the batch; null answer: the task
         * had no rows and did not write.
         */
        String sink;
        String run;
        String answer;
    }

    /**
     * The last batch write's rows sent, applied and failed ({@link WriteMetrics}); Spark's
     * V1 fallback asks after the write, also when it failed.
     */
    private volatile long[] reported = {0, 0, 0};

    @Override
    public CustomMetric[] supportedCustomMetrics() {
        return WriteMetrics.supported();
    }

    @Override
    public CustomTaskMetric[] reportDriverMetrics() {
        long[] r = reported;
        return WriteMetrics.values(r[0], r[1], r[2]);
    }

    @Override
    public void commit(WriterCommitMessage[] messages) {
        long rows = 0;
        long applied = 0;
        long failed = 0;
        Map<String, Long> codes = new TreeMap<>();
        List<String> examples = new ArrayList<>();
        for (WriterCommitMessage m : messages) {
            if (m instanceof Summary s) {
                rows += s.rows;
                applied += s.applied;
                failed += s.failed;
                s.byCode.forEach((k, v) -> codes.merge(k, v, Long::sum));
                for (int i = 0; i < Math.min(3, s.examples.size()); i++) {
                    examples.add(s.examples.get(i));
                }
            }
        }
        reported = new long[] {rows, applied, failed};
        if (failed == 0) {
            return;
        }
        StringBuilder c = new StringBuilder();
        codes.forEach((k, v) -> c.append(c.length() == 0 ? "" : ", ").append(k).append(": ").append(v));
        String text = "kudusql " + options.mode + " into " + options.table + ": " + rows
                + " rows, " + applied + " applied, " + failed + " failed (" + c
                + "); the other rows were applied and stay applied; e.g. "
                + String.join("; ", examples);
        if (options.ignoreRowErrors) {
            org.slf4j.LoggerFactory.getLogger(KudusqlWrite.class).warn(text);
            return;
        }
        throw new KudusqlException(sqlstate(codes), text);
    }

    private static String sqlstate(Map<String, Long> codes) {
        return codes.size() == 1 && codes.containsKey("ALREADY_PRESENT") ? "23505" : "22000";
    }

    @Override
    public void abort(WriterCommitMessage[] messages) {
        org.slf4j.LoggerFactory.getLogger(KudusqlWrite.class).warn("kudusql write into "
                + options.table + " aborted: rows already written stay applied (Kudu has no "
                + "multi-row transactions)");
    }

    static final class Factory implements DataWriterFactory {
        private static final long serialVersionUID = 1L;
        private final Options options;
        private final StructType schema;

        Factory(Options options, StructType schema) {
            this.options = options;
            this.schema = schema;
        }

        @Override
        public DataWriter<InternalRow> createWriter(int partitionId, long taskId) {
            return new Writer(options, schema, null);
        }
    }

    static final class Writer implements DataWriter<InternalRow> {
        private final Options options;
        private final StructType schema;
        private BufferAllocator alloc;
        private VectorSchemaRoot root;
        /** Rows in: Spark's writers (null when batches come in: {@link #copier}). */
        private ArrowWriter arrow;
        private BulkPut.Copier copier;
        private Endpoint conn;
        private ArrowStreamWriter stream;
        private int pending;
        /** The streaming sink's batch identity {sink, batch, run, attempt}, or null. */
        private final ObjectNode sink;

        Writer(Options options, StructType schema, ObjectNode sink) {
            this.options = options;
            this.schema = schema;
            this.sink = sink;
        }

        private void open(boolean columnar) throws IOException {
            // UTC: Spark TIMESTAMP (with time zone) values are UTC instants; the server
            // casts every column to the table's type
            Schema arrowSchema = ArrowUtils.toArrowSchema(schema, "UTC", true);
            alloc = ArrowUtils.rootAllocator().newChildAllocator("kudusql-put", 0, Long.MAX_VALUE);
            root = VectorSchemaRoot.create(arrowSchema, alloc);
            if (columnar) {
                for (org.apache.arrow.vector.FieldVector v : root.getFieldVectors()) {
                    v.setInitialCapacity(options.batchRows);
                    v.allocateNew();
                }
                copier = new BulkPut.Copier(root, schema);
            } else {
                // Spark's writers, compact decimals as longs
                arrow = DecimalLongWriter.over(root);
            }
            ObjectNode req = Endpoint.JSON.createObjectNode().put("op", "put")
                    .put("table", options.table).put("mode", options.mode);
            if (sink != null) {
                req.set("sink", sink);
            }
            conn = Endpoint.send(options.endpoint, req);
            stream = new ArrowStreamWriter(root, null, conn.output());
            stream.start();
        }

        @Override
        public void write(InternalRow row) throws IOException {
            if (conn == null) {
                open(false);
            }
            arrow.write(row);
            if (++pending >= options.batchRows) {
                flush();
            }
        }

        /**
         * The rows of a columnar batch (BulkPut's columnar tasks): output column i is the
         * batch's column columns[i], under Spark's NOT NULL check asserts[i] if not null;
         * copied column by column into the Arrow batch being filled, sent every
         * `batch_rows` rows. A writer takes rows or batches, not both.
         */
        void write(ColumnarBatch batch, int[] columns, Expression[] asserts) throws IOException {
            if (conn == null) {
                open(true);
            }
            int n = batch.numRows();
            for (int from = 0; from < n; ) {
                int k = Math.min(n - from, options.batchRows - pending);
                copier.copy(batch, columns, asserts, from, k, pending);
                from += k;
                pending += k;
                if (pending >= options.batchRows) {
                    flush();
                }
            }
        }

        private void flush() throws IOException {
            if (pending == 0) {
                return;
            }
            if (arrow != null) {
                arrow.finish();
            } else {
                root.setRowCount(pending);
            }
            try {
                stream.writeBatch();
                // the server answers a put before the stream's end only when it failed
                // (a chunk's insert raised): stop sending and report its error now
                if (conn.in.available() > 0) {
                    throw failure(null);
                }
            } catch (IOException e) {
                throw failure(e);
            }
            if (arrow != null) {
                arrow.reset();
            } else {
                for (org.apache.arrow.vector.FieldVector v : root.getFieldVectors()) {
                    v.reset();   // the buffers stay allocated for the next batch
                }
            }
            pending = 0;
        }

        /**
         * The server's error when it stopped taking the stream: it answers at once and
         * then reads the rest of the stream for a while before closing (the endpoint's
         * lingering close), so the answer is there to read. {@code e}: the write that
         * failed, or null when the answer came while the writes still succeeded.
         */
        private RuntimeException failure(IOException e) {
            try {
                conn.expectOk();
            } catch (KudusqlException k) {
                return k;
            } catch (IOException ignored) {
                // no answer: the connection itself failed
            }
            if (e == null) {
                return new KudusqlException("08P01", "the kudusql endpoint at " + conn.address
                        + " answered a put before the end of its stream without an error");
            }
            return Endpoint.unavailable(options.endpoint, e);
        }

        @Override
        public WriterCommitMessage commit() throws IOException {
            Summary s = new Summary();
            if (sink != null) {
                s.sink = sink.path("sink").asText();
                s.run = sink.path("run").asText();
            }
            if (conn == null) {
                return s;
            }
            flush();
            try {
                stream.end();
                conn.output().flush();
            } catch (IOException e) {
                throw failure(e);
            }
            JsonNode r;
            try {
                conn.expectOk();
                r = conn.readJson();
            } catch (IOException e) {
                throw Endpoint.unavailable(options.endpoint, e);
            }
            s.rows = r.path("rows").asLong();
            s.applied = r.path("applied").asLong();
            s.failed = r.path("failed").asLong();
            r.path("failed_by_code").properties().forEach(
                    e -> s.byCode.put(e.getKey(), e.getValue().asLong()));
            for (JsonNode e : r.path("errors")) {
                if (s.examples.size() >= 20) {
                    break;
                }
                s.examples.add(e.path("code").asText() + " key " + e.path("key") + ": "
                        + e.path("message").asText());
            }
            if (sink != null) {
                if (r.path("errors") instanceof ArrayNode errs) {
                    while (errs.size() > 20) {
                        errs.remove(errs.size() - 1);
                    }
                }
                s.answer = r.toString();
            }
            return s;
        }

        @Override
        public void abort() {
            close();
        }

        @Override
        public void close() {
            if (conn != null) {
                conn.close();
                conn = null;
            }
            if (root != null) {
                root.close();
                root = null;
            }
            if (alloc != null) {
                alloc.close();
                alloc = null;
            }
        }
    }
}
