package io.kudusql.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.apache.spark.sql.connector.read.streaming.SupportsAdmissionControl;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

/**
 * The change-data source on the JVM path: {@code spark.readStream.format("kudusql")
 * .option("endpoint" | "masters", ...).option("table", t).option("startingOffsets", s)}
 * emits every committed change of the table - the row as the commit left it (its last
 * values for a delete), {@code _is_deleted}, {@code _commit_ts} (a HybridTime) - as the
 * PySpark path's source does (kudusql/spark/streaming.py), over the Arrow stream endpoint:
 *
 * <pre>
 *   driver                                     executors
 *   initialOffset  -- changes_plan ---------> latest timestamp / ancient history mark /
 *                                             "at" (an ISO timestamp as a HybridTime)
 *   latestOffset   -- changes_plan ---------> the table's latest timestamp, "now" (the
 *                                             end of a window once the table changed)
 *   planInputPartitions(start, end]
 *                  -- changes_plan + window -> one change ticket per tablet
 *                                             (+ its replicas' endpoints on a cluster)
 *   reader (KudusqlReaderFactory) -- scan(change ticket) -> Table.changes of that tablet
 *                                             in (start, end], in commit order
 * </pre>
 *
 * <p>Offsets are HybridTimes ({@code {"ts": T}}, plus {@code "earliest": true} for a stream's
 * first window from "earliest"), checkpointed by Spark; the windows (start, end] of
 * consecutive micro-batches partition the history, so every change is delivered once, and a
 * replayed batch reads the same window again (the server waits until {@code end} is safe).
 * A key lives in one tablet, one partition, whose rows come in commit order. On an idle
 * table the offset moves to a safe fresh timestamp once it is older than half the history
 * kept ({@code "idle": true}: the server found the window empty, and it is not read), so a
 * quiet table does not stop the stream; the window of a table that changed ends "now", not
 * at its last commit, so an offset is never older than half the history kept plus the time
 * to the next trigger (a stream is refused only when that exceeds the history). A start
 * below the ancient history mark is refused on the driver ({@code startingOffsets},
 * 22023), and so is a stream stopped (or behind)
 * longer than the history kept while the table changed (or, should the mark pass it
 * between planning and reading, its task: SnapshotTooOld, 22023): never skipped silently.
 *
 * <p>Admission control: the latest offset is never below the start (a start given in the
 * future stays put until the table passes it, instead of going back and re-reading the
 * window before it); with {@code maxRowsPerTrigger} the default read limit is
 * {@code ReadLimit.maxRows} and a window ends at the last commit that keeps it within about
 * that many change rows (at least one commit: changes_plan's "limit_end"), unless Spark
 * passes {@code allAvailable} (Trigger.AvailableNow, Once).
 */
final class KudusqlChangeStream implements MicroBatchStream, SupportsAdmissionControl {
    static final String IS_DELETED = "_is_deleted";
    static final String COMMIT_TS = "_commit_ts";

    private final Options options;
    private final StructType schema;
    private final List<String> columns = new ArrayList<>();

    KudusqlChangeStream(Options options, StructType schema) {
        this.options = options;
        this.schema = schema;
        for (StructField f : schema.fields()) {
            if (!f.name().equals(IS_DELETED) && !f.name().equals(COMMIT_TS)) {
                columns.add(f.name());
            }
        }
        if (columns.size() != schema.fields().length - 2) {
            throw new KudusqlException("42P10", "a change stream's schema is the table's "
                    + "columns, " + IS_DELETED + " and " + COMMIT_TS + ", not "
                    + schema.simpleString());
        }
    }

    /** The table's schema with the change columns appended (a change stream's schema). */
    static StructType withChangeColumns(StructType table) {
        return table.add(IS_DELETED, DataTypes.BooleanType, true)
                .add(COMMIT_TS, DataTypes.LongType, true);
    }

    /**
     * A HybridTime offset: {"ts": T}, plus "earliest": true (see the class comment) or
     * "idle": true (the window ending here was found empty when it was planned: not read).
     */
    static final class ChangeOffset extends Offset {
        final long ts;
        final boolean earliest;
        final boolean idle;

        ChangeOffset(long ts, boolean earliest) {
            this(ts, earliest, false);
        }

        ChangeOffset(long ts, boolean earliest, boolean idle) {
            this.ts = ts;
            this.earliest = earliest;
            this.idle = idle;
        }

        @Override
        public String json() {
            return "{\"ts\":" + ts + (earliest ? ",\"earliest\":true" : "")
                    + (idle ? ",\"idle\":true" : "") + "}";
        }
    }

    private JsonNode plan(String at, ChangeOffset start, ChangeOffset end) {
        return plan(at, start, end, null);
    }

    /** changes_plan; {@code extra}: "fresh" / "idle_from" (wire.flight.changes_plan). */
    private JsonNode plan(String at, ChangeOffset start, ChangeOffset end, ObjectNode extra) {
        ObjectNode req = Endpoint.JSON.createObjectNode().put("op", "changes_plan")
                .put("table", options.table);
        if (extra != null) {
            req.setAll(extra);
        }
        if (at != null) {
            req.put("at", at);
        }
        if (start != null) {
            req.put("start", start.ts).put("end", end.ts).put("earliest", start.earliest);
            ArrayNode cols = req.putArray("columns");
            columns.forEach(cols::add);
        }
        return Endpoint.call(options.endpoint, req);
    }

    @Override
    public Offset initialOffset() {
        String s = options.startingOffsets;
        String l = s.toLowerCase();
        if (l.equals("latest")) {   // a safe fresh timestamp: never below the mark
            ObjectNode fresh = Endpoint.JSON.createObjectNode().put("fresh", true);
            return new ChangeOffset(plan(null, null, null, fresh).path("fresh").asLong(),
                    false);
        }
        if (l.equals("earliest")) {
            return new ChangeOffset(plan(null, null, null).path("ahm").asLong(), true);
        }
        JsonNode p;
        long ts;
        if (s.chars().allMatch(Character::isDigit)) {
            p = plan(null, null, null);
            try {
                ts = Long.parseLong(s);
            } catch (NumberFormatException e) {
                throw new KudusqlException("22023", "startingOffsets " + s + " is not a "
                        + "HybridTime (too large)");
            }
        } else {
            p = plan(s, null, null);   // an ISO timestamp: the server resolves it
            ts = p.path("at").asLong();
        }
        long ahm = p.path("ahm").asLong();
        if (ts < ahm) {
            throw new KudusqlException("22023", "startingOffsets " + s + " is before the "
                    + "ancient history mark (" + ahm + ") of table \"" + options.table
                    + "\": changes before it may have been garbage collected "
                    + "(history_max_age_s); start at \"earliest\" or later");
        }
        return new ChangeOffset(ts, false);
    }

    @Override
    public Offset latestOffset() {
        return new ChangeOffset(plan(null, null, null).path("latest").asLong(), false);
    }

    @Override
    public Offset latestOffset(Offset startOffset, ReadLimit limit) {
        if (startOffset == null) {
            return latestOffset();
        }
        ChangeOffset start = (ChangeOffset) startOffset;
        ObjectNode extra = Endpoint.JSON.createObjectNode().put("idle_from", start.ts);
        if (limit instanceof ReadMaxRows m) {
            // the engine's limit, not the option's (Trigger.AvailableNow passes all)
            extra.put("limit_from", start.ts).put("limit_rows", m.maxRows())
                    .put("limit_earliest", start.earliest);
        }
        JsonNode p = plan(null, null, null, extra);
        if (p.has("idle")) {
            // no change after start, which is getting old: move on to a safe fresh
            // timestamp; the window (start, idle] is empty and not read
            return new ChangeOffset(p.path("idle").asLong(), false, true);
        }
        long latest = p.path("latest").asLong();
        if (latest <= start.ts) {
            return start;   // nothing new (Spark runs no batch for an unchanged offset)
        }
        long ahm = p.path("ahm").asLong();
        if (start.ts < ahm && !start.earliest) {
            throw new KudusqlException("22023", "the change stream of table \""
                    + options.table + "\" is at offset " + start.ts + ", before the ancient "
                    + "history mark (" + ahm + "), and the table changed since: it was "
                    + "stopped or behind for longer than the history kept "
                    + "(history_max_age_s), so changes may have been garbage collected; "
                    + "start a new stream (a new checkpoint) at \"earliest\" or later");
        }
        if (p.has("limit_end")) {   // the rate limit: up to a commit, not "now"
            return new ChangeOffset(p.path("limit_end").asLong(), false);
        }
        // the window ends now, not at the last commit (which may be a trigger old): the
        // next window's start is then no older than the time between two triggers
        return new ChangeOffset(Math.max(latest, p.path("now").asLong(latest)), false);
    }

    @Override
    public ReadLimit getDefaultReadLimit() {
        return options.maxRowsPerTrigger > 0 ? ReadLimit.maxRows(options.maxRowsPerTrigger)
                : ReadLimit.allAvailable();
    }

    @Override
    public InputPartition[] planInputPartitions(Offset startOffset, Offset endOffset) {
        ChangeOffset start = (ChangeOffset) startOffset;
        ChangeOffset end = (ChangeOffset) endOffset;
        if (end.ts <= start.ts || end.idle) {
            return new InputPartition[0];
        }
        // a change ticket's stream is not resumable: a broken one fails the task, and the
        // batch is read again from its checkpointed window
        return KudusqlScan.partitions(plan(null, start, end), options, false);
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        return new KudusqlReaderFactory(schema);
    }

    @Override
    public Offset deserializeOffset(String json) {
        try {
            JsonNode n = Endpoint.JSON.readTree(json);
            if (!n.path("ts").canConvertToLong()) {
                throw new IOException("no \"ts\"");
            }
            return new ChangeOffset(n.path("ts").asLong(), n.path("earliest").asBoolean(false),
                    n.path("idle").asBoolean(false));
        } catch (IOException e) {
            throw new KudusqlException("22023", "the checkpoint's offset " + json + " is not "
                    + "a kudusql change stream's offset ({\"ts\": HybridTime}): " + e.getMessage());
        }
    }

    @Override
    public void commit(Offset end) {
        // nothing to release: the windows are read from the tablets' history, which the
        // server keeps for history_max_age_s whatever the stream has consumed
    }

    @Override
    public void stop() {
    }
}
