package io.kudusql.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.Statistics;
import org.apache.spark.sql.connector.read.SupportsPushDownFilters;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.connector.read.SupportsReportStatistics;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

import java.util.ArrayList;
import java.util.List;
import java.util.OptionalLong;

/**
 * One scan of a kudusql table: the columns Spark needs (pruning), the filters kudusql
 * evaluates exactly (pushdown, checked by the server's "bind"), planned ONCE by the
 * endpoint's "plan" — one snapshot timestamp T for every partition (READ_AT_SNAPSHOT, as
 * Kudu's connector), one input partition per tablet the predicates leave, each with the
 * tablet's host as its preferred location (on a cluster: the hosts of the tablet's replicas,
 * whose tablet servers' endpoints the task tries in turn).
 */
final class KudusqlScan implements Scan, SupportsReportStatistics, Batch {
    private final Options options;
    private final StructType readSchema;
    private final List<ObjectNode> predicates;
    private final Filter[] pushed;
    private JsonNode plan;

    private KudusqlScan(Options options, StructType readSchema, List<ObjectNode> predicates,
                        Filter[] pushed) {
        this.options = options;
        this.readSchema = readSchema;
        this.predicates = predicates;
        this.pushed = pushed;
    }

    static final class Builder implements ScanBuilder, SupportsPushDownRequiredColumns,
            SupportsPushDownFilters {
        private final Options options;
        private final StructType schema;
        private StructType required;
        private final List<ObjectNode> predicates = new ArrayList<>();
        private Filter[] pushed = new Filter[0];

        Builder(Options options, StructType schema) {
            this.options = options;
            this.schema = schema;
            this.required = schema;
        }

        @Override
        public void pruneColumns(StructType requiredSchema) {
            this.required = requiredSchema;
        }

        @Override
        public Filter[] pushFilters(Filter[] filters) {
            if (!options.pushdown) {
                return filters;
            }
            // every candidate predicate, then one "bind" round trip: the server says which
            // literals bind to their column's type (the others are not pushed)
            List<List<ObjectNode>> exact = new ArrayList<>();
            List<List<ObjectNode>> partial = new ArrayList<>();
            ArrayNode all = Endpoint.JSON.createArrayNode();
            for (Filter f : filters) {
                List<ObjectNode> e = Filters.convert(f, schema);
                List<ObjectNode> p = e != null ? e : Filters.implied(f, schema);
                exact.add(e);
                partial.add(p);
                p.forEach(all::add);
            }
            boolean[] ok = new boolean[all.size()];
            if (all.size() > 0) {
                ObjectNode req = Endpoint.JSON.createObjectNode().put("op", "bind")
                        .put("table", options.table);
                req.set("predicates", all);
                JsonNode res = Endpoint.call(options.endpoint, req);
                for (int i = 0; i < ok.length; i++) {
                    ok[i] = res.get(i).asBoolean(false);
                }
            }
            List<Filter> rest = new ArrayList<>();
            List<Filter> done = new ArrayList<>();
            int i = 0;
            for (int k = 0; k < filters.length; k++) {
                boolean allBound = true;
                for (ObjectNode p : partial.get(k)) {
                    if (ok[i++]) {
                        predicates.add(p);
                    } else {
                        allBound = false;
                    }
                }
                if (exact.get(k) != null && allBound) {
                    done.add(filters[k]);
                } else {
                    rest.add(filters[k]); // Spark evaluates it (again)
                }
            }
            pushed = done.toArray(new Filter[0]);
            return rest.toArray(new Filter[0]);
        }

        @Override
        public Filter[] pushedFilters() {
            return pushed;
        }

        @Override
        public Scan build() {
            return new KudusqlScan(options, required, new ArrayList<>(predicates), pushed);
        }
    }

    @Override
    public StructType readSchema() {
        return readSchema;
    }

    @Override
    public String description() {
        return "kudusql " + options.table + " " + readSchema.simpleString() + " pushed "
                + predicates;
    }

    @Override
    public Batch toBatch() {
        if (options.startingOffsets != null) {
            // the schema has the change columns, which a table read does not produce
            throw new KudusqlException("0A000", "\"startingOffsets\" names a change stream, "
                    + "which is read with spark.readStream; a batch read of table \""
                    + options.table + "\" takes \"snapshot\" (a HybridTime) instead");
        }
        return this;
    }

    /**
     * A streaming read: the table's change feed (Spark builds the scan with no pushdown for
     * a micro-batch stream, so the read schema is the whole table's plus the change
     * columns). Without "startingOffsets" the schema has no change columns: refused with a
     * message naming the option, as on the PySpark path.
     */
    @Override
    public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
        if (options.startingOffsets == null) {
            throw new KudusqlException("22023", "a kudusql change stream needs "
                    + ".option(\"startingOffsets\", \"latest\" | \"earliest\" | a HybridTime | "
                    + "an ISO timestamp)");
        }
        return new KudusqlChangeStream(options, readSchema);
    }

    /** The endpoint's plan of this scan (made once; the stats and the partitions share it). */
    private synchronized JsonNode plan() {
        if (plan == null) {
            ObjectNode req = Endpoint.JSON.createObjectNode().put("op", "plan")
                    .put("table", options.table).put("estimate", true);
            ArrayNode cols = req.putArray("columns");
            for (StructField f : readSchema.fields()) {
                cols.add(f.name());
            }
            ArrayNode preds = req.putArray("predicates");
            predicates.forEach(preds::add);
            if (options.snapshot != null) {
                req.put("snapshot", options.snapshot);
            }
            plan = Endpoint.call(options.endpoint, req);
        }
        return plan;
    }

    @Override
    public Statistics estimateStatistics() {
        // a change stream's micro-batch (Spark asks its scan too): no estimate of the
        // changes, and no table plan (its schema has the change columns)
        long rows = options.startingOffsets != null ? -1 : plan().path("rows").asLong(-1);
        long width = 8;
        for (StructField f : readSchema.fields()) {
            width += f.dataType().defaultSize();
        }
        long size = rows < 0 ? -1 : Math.max(1, rows) * width;
        return new Statistics() {
            @Override
            public OptionalLong sizeInBytes() {
                return size < 0 ? OptionalLong.empty() : OptionalLong.of(size);
            }

            @Override
            public OptionalLong numRows() {
                return rows < 0 ? OptionalLong.empty() : OptionalLong.of(rows);
            }
        };
    }

    @Override
    public InputPartition[] planInputPartitions() {
        JsonNode p = plan();
        return partitions(p, options, p.path("resumable").asBoolean(false));
    }

    /** One partition per ticket of a scan or changes `plan`. On a cluster the plan names,
     * per ticket, the Arrow stream endpoints of the tablet servers holding a replica: the
     * task prefers their hosts and reads from the first that answers; on a single node,
     * the endpoint itself. `resumable`: whether a broken stream may go on from the rows
     * it delivered (scans) or fails the task (change tickets). */
    static InputPartition[] partitions(JsonNode plan, Options options, boolean resumable) {
        JsonNode locations = plan.path("locations");
        List<InputPartition> parts = new ArrayList<>();
        int i = 0;
        for (JsonNode t : plan.path("tickets")) {
            List<String> addrs = new ArrayList<>();
            for (JsonNode a : locations.path(i++)) {
                addrs.add(a.asText());
            }
            if (addrs.isEmpty()) {
                addrs.addAll(List.of(options.endpoint.split(",")));
            }
            parts.add(new KudusqlPartition(String.join(",", addrs), t.toString(),
                    hosts(addrs), resumable));
        }
        return parts.toArray(new InputPartition[0]);
    }

    /** The distinct hosts of "host:port" endpoints, in order (a partition's preferred
     *  locations). */
    static String[] hosts(List<String> addrs) {
        List<String> hosts = new ArrayList<>();
        for (String a : addrs) {
            String h = a.trim().substring(0, a.trim().lastIndexOf(':'));
            if (!hosts.contains(h)) {
                hosts.add(h);
            }
        }
        return hosts.toArray(new String[0]);
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        return new KudusqlReaderFactory(readSchema);
    }
}
