package io.kudusql.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.DecimalVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.ArrowUtils;
import org.apache.spark.sql.vectorized.ArrowColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

/**
 * Columnar reads: each partition's Arrow IPC stream is read with arrow-vector's
 * ArrowStreamReader into ColumnarBatches of ArrowColumnVectors over the stream's buffers
 * (no per-value copy into Spark rows; DECIMALs of <= 18 digits through DecimalLongVector).
 */
final class KudusqlReaderFactory implements PartitionReaderFactory {
    private static final long serialVersionUID = 1L;

    private final StructType schema;

    KudusqlReaderFactory(StructType schema) {
        this.schema = schema;
    }

    @Override
    public boolean supportColumnarReads(InputPartition partition) {
        return true;
    }

    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
        throw new UnsupportedOperationException("kudusql reads are columnar");
    }

    @Override
    public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
        return new Reader((KudusqlPartition) partition, schema);
    }

    /**
     * One partition's stream. When the stream breaks (the endpoint's server dies, the
     * connection drops, the trailer never comes) and the plan said the scan is
     * "resumable" (a tablet server's endpoint: the ticket's rows come in primary-key
     * order at the ticket's snapshot, the same sequence from every endpoint), the reader
     * asks the partition's other endpoints, then the same one again, for the same ticket
     * with "skip" = the rows it already handed to Spark, retrying with backoff for up to
     * RESUME_DEADLINE_MS: no row lost, none repeated, and the task does not fail (in
     * local[N] Spark does not retry a task). An error the server reports (the trailer's,
     * or an answer's) is not retried; a non-resumable stream that breaks fails the task.
     */
    static final class Reader implements PartitionReader<ColumnarBatch> {
        static final long RESUME_DEADLINE_MS = 60_000;
        private static final org.slf4j.Logger LOG =
                org.slf4j.LoggerFactory.getLogger(KudusqlReaderFactory.class);

        private final KudusqlPartition part;
        private final StructType schema;
        private final JsonNode ticket;
        private final BufferAllocator alloc;
        private Endpoint conn;
        private ArrowStreamReader reader;
        private ColumnarBatch batch;
        private boolean done;
        private long delivered;   // rows handed to Spark so far
        private int resumes;

        Reader(KudusqlPartition part, StructType schema) {
            this.part = part;
            this.schema = schema;
            try {
                this.ticket = Endpoint.JSON.readTree(part.ticket);
            } catch (IOException e) {
                throw new IllegalStateException("kudusql: a malformed scan ticket", e);
            }
            this.alloc = ArrowUtils.rootAllocator().newChildAllocator("kudusql-scan", 0,
                    Long.MAX_VALUE);
            try {
                // the replicas' endpoints in turn, until one answers
                open(part.endpoint, 0);
            } catch (RuntimeException e) {
                alloc.close();
                throw e;
            }
        }

        private void open(String addresses, long skip) {
            ObjectNode req = Endpoint.JSON.createObjectNode().put("op", "scan");
            req.set("ticket", ticket);
            if (skip > 0) {
                req.put("skip", skip);
            }
            conn = Endpoint.open(addresses, req);
            reader = new ArrowStreamReader(conn.input(), alloc);
        }

        @Override
        public boolean next() throws IOException {
            if (done) {
                return false;
            }
            while (true) {
                try {
                    if (!reader.loadNextBatch()) {
                        // the trailer: ok, or the error that cut the stream short
                        // (thrown as the server's error, not retried)
                        conn.expectOk();
                        conn.readJson();
                        done = true;
                        return false;
                    }
                } catch (IOException e) {
                    if (!part.resumable) {
                        throw Endpoint.unavailable(conn.address, e);
                    }
                    resume(e);
                    continue;
                }
                VectorSchemaRoot root = reader.getVectorSchemaRoot();
                if (batch == null) {
                    List<FieldVector> vs = root.getFieldVectors();
                    ColumnVector[] cols = new ColumnVector[vs.size()];
                    for (int i = 0; i < cols.length; i++) {
                        FieldVector v = vs.get(i);
                        if (v instanceof DecimalVector d
                                && schema.fields()[i].dataType() instanceof DecimalType t
                                && DecimalLongVector.fits(t)) {
                            cols[i] = new DecimalLongVector(t, d);
                        } else {
                            cols[i] = new ArrowColumnVector(v);
                        }
                    }
                    batch = new ColumnarBatch(cols);
                }
                batch.setNumRows(root.getRowCount());
                delivered += root.getRowCount();
                return true;
            }
        }

        /**
         * The stream broke after `delivered` rows: open the same ticket again, skipping
         * them, at the partition's endpoints starting after the one that failed (it comes
         * last: it may only have dropped the connection), until one answers or the
         * deadline passes.
         */
        private void resume(IOException cause) {
            String failed = conn.address;
            closeStream();
            List<String> all = new ArrayList<>();
            for (String a : part.endpoint.split(",")) {
                all.add(a.trim());
            }
            int at = all.indexOf(failed);
            List<String> order = new ArrayList<>(all.subList(at + 1, all.size()));
            order.addAll(all.subList(0, at + 1));
            String addresses = String.join(",", order);
            long deadline = System.currentTimeMillis() + RESUME_DEADLINE_MS;
            long backoff = 50;
            while (true) {
                try {
                    open(addresses, delivered);
                    resumes++;
                    LOG.warn("kudusql: the scan stream from " + failed + " broke after "
                            + delivered + " rows (" + cause + "); resumed at " + conn.address
                            + " (resume " + resumes + ")");
                    return;
                } catch (KudusqlException e) {
                    if (!"08001".equals(e.sqlstate())
                            || System.currentTimeMillis() + backoff > deadline) {
                        if ("08001".equals(e.sqlstate())) {
                            throw new KudusqlException("08006", "the scan stream from "
                                    + failed + " broke after " + delivered + " rows ("
                                    + cause.getMessage() + ") and no endpoint of " + addresses
                                    + " answered within " + RESUME_DEADLINE_MS / 1000
                                    + " s to resume it; the last: " + e.reason());
                        }
                        throw e;
                    }
                }
                try {
                    Thread.sleep(backoff);
                } catch (InterruptedException ie) {
                    Thread.currentThread().interrupt();
                    throw new KudusqlException("57014", "the scan was cancelled while "
                            + "resuming its stream");
                }
                backoff = Math.min(backoff * 2, 1000);
            }
        }

        /** Closes the current stream (the batch over its vectors goes with it). */
        private void closeStream() {
            batch = null;
            try {
                reader.close();
            } catch (IOException ignored) {
                // the stream is broken already
            } finally {
                conn.close();
            }
        }

        @Override
        public ColumnarBatch get() {
            return batch;
        }

        @Override
        public void close() throws IOException {
            try {
                if (reader != null) {
                    closeStream();
                }
            } finally {
                alloc.close();
            }
        }
    }
}
