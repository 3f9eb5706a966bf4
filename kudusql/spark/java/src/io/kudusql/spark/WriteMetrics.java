package io.kudusql.spark;

import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.metric.CustomSumMetric;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;

/**
 * A batch write's SQL metrics: the rows sent, applied and failed, summed over the tasks'
 * summaries on the driver ({@link KudusqlWrite#reportDriverMetrics}). A batch write is a
 * V1 write ({@link BulkPut} runs its own job), so Spark's DataSource V2 write metrics
 * (its writers' counts) do not apply; Spark's V1 fallback shows these on the write's plan
 * node instead (the SQL tab; {@code SQLAppStatusStore}). Spark creates each metric class
 * by name with its no-argument constructor, hence the public classes.
 */
public final class WriteMetrics {
    private WriteMetrics() {
    }

    /** Rows the tasks sent. */
    public static final class Rows extends CustomSumMetric {
        @Override
        public String name() {
            return "kudusqlRows";
        }

        @Override
        public String description() {
            return "rows sent to kudusql";
        }
    }

    /** Rows the server applied. */
    public static final class Applied extends CustomSumMetric {
        @Override
        public String name() {
            return "kudusqlApplied";
        }

        @Override
        public String description() {
            return "rows applied by kudusql";
        }
    }

    /** Rows that failed (row errors). */
    public static final class Failed extends CustomSumMetric {
        @Override
        public String name() {
            return "kudusqlFailed";
        }

        @Override
        public String description() {
            return "rows failed (row errors)";
        }
    }

    static CustomMetric[] supported() {
        return new CustomMetric[] {new Rows(), new Applied(), new Failed()};
    }

    static CustomTaskMetric[] values(long rows, long applied, long failed) {
        return new CustomTaskMetric[] {value("kudusqlRows", rows),
                value("kudusqlApplied", applied), value("kudusqlFailed", failed)};
    }

    private static CustomTaskMetric value(String name, long v) {
        return new CustomTaskMetric() {
            @Override
            public String name() {
                return name;
            }

            @Override
            public long value() {
                return v;
            }
        };
    }
}
