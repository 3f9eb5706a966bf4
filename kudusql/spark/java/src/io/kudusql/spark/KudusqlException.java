package io.kudusql.spark;

/**
 * An error kudusql reported (or a connection failure), in SQL's words: the message is
 * "kudusql: MESSAGE (SQLSTATE XXXXX)". It is an IllegalArgumentException so that PySpark
 * shows it as pyspark.errors.IllegalArgumentException with this message only, not a Java
 * stack trace, when it happens while Spark plans the query (a missing table, a server
 * down, a bad option).
 */
public class KudusqlException extends IllegalArgumentException {
    private final String sqlstate;
    private final String reason;

    public KudusqlException(String sqlstate, String message) {
        super("kudusql: " + message + " (SQLSTATE " + sqlstate + ")");
        this.sqlstate = sqlstate;
        this.reason = message;
    }

    /** The message without the "kudusql: " prefix and the SQLSTATE. */
    public String reason() {
        return reason;
    }

    public String sqlstate() {
        return sqlstate;
    }
}
