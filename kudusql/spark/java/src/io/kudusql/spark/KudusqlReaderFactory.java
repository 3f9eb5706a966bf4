package io.kudusql.spark;

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

    static final class Reader implements PartitionReader<ColumnarBatch> {
        private final KudusqlPartition part;
        private final StructType schema;
        private final Endpoint conn;
        private final BufferAllocator alloc;
        private final ArrowStreamReader reader;
        private ColumnarBatch batch;
        private boolean done;

        Reader(KudusqlPartition part, StructType schema) {
            this.part = part;
            this.schema = schema;
            ObjectNode req = Endpoint.JSON.createObjectNode().put("op", "scan");
            try {
                req.set("ticket", Endpoint.JSON.readTree(part.ticket));
            } catch (IOException e) {
                throw new IllegalStateException("kudusql: a malformed scan ticket", e);
            }
            // the replicas' endpoints in turn, until one answers (a failure after the
            // stream started fails the task: Spark retries it, skipping a dead server)
            this.conn = Endpoint.open(part.endpoint, req);
            this.alloc = ArrowUtils.rootAllocator().newChildAllocator("kudusql-scan", 0,
                    Long.MAX_VALUE);
            this.reader = new ArrowStreamReader(conn.input(), alloc);
        }

        @Override
        public boolean next() throws IOException {
            if (done) {
                return false;
            }
            boolean more;
            try {
                more = reader.loadNextBatch();
            } catch (IOException e) {
                throw Endpoint.unavailable(part.endpoint, e);
            }
            if (!more) {
                done = true;
                // the trailer: ok, or the error that cut the stream short
                conn.expectOk();
                conn.readJson();
                return false;
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
            return true;
        }

        @Override
        public ColumnarBatch get() {
            return batch;
        }

        @Override
        public void close() throws IOException {
            try {
                reader.close();
            } finally {
                alloc.close();
                conn.close();
            }
        }
    }
}
