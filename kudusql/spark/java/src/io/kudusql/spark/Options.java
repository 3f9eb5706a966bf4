package io.kudusql.spark;

import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import java.io.Serializable;

/** The data source options of the JVM path (docs/spark.md), checked once on the driver. */
final class Options implements Serializable {
    private static final long serialVersionUID = 1L;

    final String endpoint;
    final String table;
    final boolean pushdown;
    final Long snapshot;
    final String mode;
    final boolean ignoreRowErrors;
    final int batchRows;
    /** A change stream's start ("startingOffsets"), or null: a table read (docs/spark.md). */
    final String startingOffsets;
    /** A change stream's rate limit ("maxRowsPerTrigger"), or 0: none. */
    final long maxRowsPerTrigger;

    private Options(String endpoint, String table, boolean pushdown, Long snapshot, String mode,
                    boolean ignoreRowErrors, int batchRows, String startingOffsets,
                    long maxRowsPerTrigger) {
        this.endpoint = endpoint;
        this.table = table;
        this.pushdown = pushdown;
        this.snapshot = snapshot;
        this.mode = mode;
        this.ignoreRowErrors = ignoreRowErrors;
        this.batchRows = batchRows;
        this.startingOffsets = startingOffsets;
        this.maxRowsPerTrigger = maxRowsPerTrigger;
    }

    static Options of(CaseInsensitiveStringMap o) {
        String endpoint = o.get("endpoint");
        String table = o.get("table");
        String masters = o.get("masters");
        if ((endpoint == null || endpoint.isEmpty()) && masters != null && !masters.isEmpty()
                && table != null && !table.isEmpty()) {
            endpoint = locate(masters, table);
        }
        if (endpoint == null || endpoint.isEmpty() || table == null || table.isEmpty()) {
            throw new IllegalArgumentException("kudusql: the data source needs "
                    + ".option(\"endpoint\", \"host:port\") (or .option(\"masters\", "
                    + "\"host:port,...\") for a cluster) and .option(\"table\", name)");
        }
        String snap = o.get("snapshot");
        Long snapshot = null;
        if (snap != null && !snap.isEmpty()) {
            try {
                snapshot = Long.parseLong(snap.trim());
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("kudusql: option \"snapshot\" is a timestamp "
                        + "(an integer), not \"" + snap + "\"");
            }
        }
        String mode = o.getOrDefault("mode", "insert").toLowerCase();
        if (!mode.equals("insert") && !mode.equals("upsert")) {
            throw new IllegalArgumentException("kudusql: option \"mode\" is insert or upsert, not \""
                    + mode + "\"");
        }
        String start = o.get("startingOffsets");
        if (start != null && start.trim().isEmpty()) {
            start = null;
        }
        String maxRows = o.get("maxRowsPerTrigger");
        long limit = 0;
        if (maxRows != null && !maxRows.trim().isEmpty()) {
            try {
                limit = Long.parseLong(maxRows.trim());
            } catch (NumberFormatException e) {
                limit = -1;
            }
            if (limit <= 0) {
                throw new KudusqlException("22023", "option \"maxRowsPerTrigger\" is a "
                        + "positive integer, not \"" + maxRows + "\"");
            }
        }
        return new Options(endpoint, table, o.getBoolean("pushdown", true), snapshot, mode,
                o.getBoolean("ignore_row_errors", false), o.getInt("batch_rows", 65536),
                start == null ? null : start.trim(), limit);
    }

    /**
     * "masters" (the masters' Arrow stream endpoints, `kudusql master --arrow-port`) to the
     * tablet servers' endpoints, as "endpoint" lists them: the first master that answers
     * `locate` (a follower relays the leader's answer) names the live tablet servers that
     * serve one. Asked once per planning on the driver; executors get the resolved list
     * (and each ticket's replica endpoints from the plan).
     */
    static String locate(String masters, String table) {
        com.fasterxml.jackson.databind.node.ObjectNode req = Endpoint.JSON.createObjectNode()
                .put("op", "locate").put("table", table);
        com.fasterxml.jackson.databind.JsonNode ans = null;
        KudusqlException last = null;
        // one master after the other: one that cannot be reached (08001), or a follower
        // that cannot reach the leader now (57P03: no leader yet, the leader down), is
        // followed by the next; any other error (42P01: no such table) is the answer
        for (String m : masters.split(",")) {
            try {
                ans = Endpoint.call(m.trim(), req);
                break;
            } catch (KudusqlException e) {
                if (!"08001".equals(e.sqlstate()) && !"57P03".equals(e.sqlstate())) {
                    throw e;
                }
                last = e;
            }
        }
        if (ans == null) {
            throw new KudusqlException(last.sqlstate(), "no master of " + masters
                    + " answered; the last: " + last.reason() + " (\"masters\" names the "
                    + "masters' Arrow stream endpoints, `kudusql master --arrow-port`, "
                    + "arrow_port in cluster.json; their RPC addresses need rpc_secret_file "
                    + "and the PySpark source)");
        }
        StringBuilder out = new StringBuilder();
        for (com.fasterxml.jackson.databind.JsonNode a : ans.path("endpoints")) {
            if (out.length() > 0) {
                out.append(',');
            }
            out.append(a.asText());
        }
        if (out.length() == 0) {
            throw new KudusqlException("08001", "the masters " + masters + " know no live "
                    + "tablet server serving an Arrow stream endpoint (`kudusql tserver "
                    + "--arrow-port`)");
        }
        return out.toString();
    }
}
