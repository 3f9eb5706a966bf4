package io.kudusql.spark;

import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.arrow.vector.types.pojo.Schema;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.ArrowUtils;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import java.io.IOException;
import java.util.Map;

/**
 * {@code spark.read.format("kudusql")} on the JVM: a DataSource V2 table provider reading
 * kudusql's Arrow IPC stream endpoint (option "endpoint" = host:port, wire/arrow_stream.py).
 *
 * <p>"masters" without "rpc_secret_file" is the JVM path too: the masters' endpoints name
 * the tablet servers' ({@link Options#locate}). With the options of the Python data source
 * ("flight" = grpc://..., or "masters" + "rpc_secret_file": the masters' RPC) it hands the
 * whole read or write to kudusql's PySpark data source, registered by kudusql.spark under
 * the name {@value #PYTHON_NAME}: one format name, two paths, the options decide. The same
 * rule picks the path of {@code writeStream.format("kudusql")}: the JVM path's table
 * supports STREAMING_WRITE ({@link KudusqlStreamingWrite}) and MICRO_BATCH_READ (the change
 * source, "startingOffsets": {@link KudusqlChangeStream}).
 */
public final class KudusqlSource implements TableProvider, DataSourceRegister {
    public static final String PYTHON_NAME = "kudusql_python";

    private PythonDataSourceV2 python;

    @Override
    public String shortName() {
        return "kudusql";
    }

    /**
     * The JVM path: "endpoint" (a server's or the tablet servers' Arrow stream endpoints),
     * or "masters" without "rpc_secret_file" (the masters' Arrow stream endpoints, which
     * name the tablet servers': {@link Options#locate}). "masters" with "rpc_secret_file"
     * names the masters' RPC addresses, which only the PySpark source (the client library,
     * holding the secret) speaks, as it alone speaks "flight".
     */
    static boolean jvmPath(Map<String, String> options) {
        CaseInsensitiveStringMap o = options instanceof CaseInsensitiveStringMap
                ? (CaseInsensitiveStringMap) options : new CaseInsensitiveStringMap(options);
        if (o.containsKey("rpc_secret_file")) {
            return false;
        }
        return o.containsKey("endpoint") || o.containsKey("masters");
    }

    private PythonDataSourceV2 python() {
        if (python == null) {
            python = new PythonDataSourceV2();
            python.setShortName(PYTHON_NAME);
        }
        return python;
    }

    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        if (!jvmPath(options)) {
            return python().inferSchema(options);
        }
        Options o = Options.of(options);
        StructType schema = ArrowUtils.fromArrowSchema(arrowSchema(o.endpoint, o.table));
        if (o.startingOffsets != null) {
            // a change stream (readStream): Spark asks a provider for one schema for batch
            // and streaming reads alike, and only "startingOffsets" tells them apart, as on
            // the PySpark path
            schema = KudusqlChangeStream.withChangeColumns(schema);
        }
        return schema;
    }

    /** The table's Arrow schema, from the endpoint's "schema" answer (a stream, no batch). */
    static Schema arrowSchema(String endpoint, String table) {
        ObjectNode req = Endpoint.JSON.createObjectNode().put("op", "schema").put("table", table);
        try (Endpoint e = Endpoint.open(endpoint, req)) {
            BufferAllocator alloc = ArrowUtils.rootAllocator().newChildAllocator("kudusql-schema",
                    0, Long.MAX_VALUE);
            try (ArrowStreamReader r = new ArrowStreamReader(e.input(), alloc)) {
                return r.getVectorSchemaRoot().getSchema();
            } finally {
                alloc.close();
            }
        } catch (IOException ex) {
            throw Endpoint.unavailable(endpoint, ex);
        }
    }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning,
                          Map<String, String> properties) {
        if (!jvmPath(properties)) {
            return python().getTable(schema, partitioning, properties);
        }
        return new KudusqlTable(Options.of(new CaseInsensitiveStringMap(properties)), schema);
    }

    @Override
    public boolean supportsExternalMetadata() {
        return false;
    }
}
