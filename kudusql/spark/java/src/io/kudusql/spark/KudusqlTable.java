package io.kudusql.spark;

import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import java.util.EnumSet;
import java.util.Set;

/**
 * A kudusql table read and written through the Arrow stream endpoint: batch reads, batch
 * writes, Structured Streaming writes (the exactly-once sink) and streaming reads (the
 * change source, {@link KudusqlChangeStream}; docs/spark.md).
 */
final class KudusqlTable implements SupportsRead, SupportsWrite {
    private final Options options;
    private final StructType schema;

    KudusqlTable(Options options, StructType schema) {
        this.options = options;
        this.schema = schema;
    }

    @Override
    public String name() {
        return "kudusql." + options.table;
    }

    @Override
    @SuppressWarnings("deprecation")
    public StructType schema() {
        return schema;
    }

    @Override
    public Set<TableCapability> capabilities() {
        // no TRUNCATE / OVERWRITE, so Spark refuses mode("overwrite") and a streaming
        // "complete" output mode (Kudu's connector has no truncate either); STREAMING_WRITE:
        // the exactly-once sink (KudusqlStreamingWrite)
        // V1_BATCH_WRITE: a batch write gets the DataFrame (KudusqlWrite.toInsertableRelation,
        // BulkPut: a columnar scan's batches are copied into Arrow without rows)
        // MICRO_BATCH_READ: the change source (KudusqlScan.toMicroBatchStream)
        return EnumSet.of(TableCapability.BATCH_READ, TableCapability.BATCH_WRITE,
                TableCapability.V1_BATCH_WRITE, TableCapability.STREAMING_WRITE,
                TableCapability.MICRO_BATCH_READ);
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap opts) {
        return new KudusqlScan.Builder(Options.of(opts), schema);
    }

    @Override
    public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
        return new KudusqlWrite(Options.of(info.options()), info.schema(), info.queryId());
    }
}
