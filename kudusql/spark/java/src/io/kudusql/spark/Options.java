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

    private Options(String endpoint, String table, boolean pushdown, Long snapshot, String mode,
                    boolean ignoreRowErrors, int batchRows) {
        this.endpoint = endpoint;
        this.table = table;
        this.pushdown = pushdown;
        this.snapshot = snapshot;
        this.mode = mode;
        this.ignoreRowErrors = ignoreRowErrors;
        this.batchRows = batchRows;
    }

    static Options of(CaseInsensitiveStringMap o) {
        String endpoint = o.get("endpoint");
        String table = o.get("table");
        if (endpoint == null || endpoint.isEmpty() || table == null || table.isEmpty()) {
            throw new IllegalArgumentException("kudusql: the data source needs "
                    + ".option(\"endpoint\", \"host:port\") and .option(\"table\", name)");
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
        return new Options(endpoint, table, o.getBoolean("pushdown", true), snapshot, mode,
                o.getBoolean("ignore_row_errors", false), o.getInt("batch_rows", 65536));
    }
}
