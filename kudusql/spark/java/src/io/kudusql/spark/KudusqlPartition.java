package io.kudusql.spark;

import org.apache.spark.sql.connector.read.InputPartition;

/**
 * One tablet of a planned scan: where to read it (the endpoints, in turn), the endpoint's
 * ticket (JSON), and whether a broken stream may be resumed (the plan's "resumable": the
 * ticket's rows come in primary-key order, the same sequence from every endpoint).
 */
final class KudusqlPartition implements InputPartition {
    private static final long serialVersionUID = 1L;

    final String endpoint;
    final String ticket;
    final boolean resumable;
    private final String[] hosts;

    KudusqlPartition(String endpoint, String ticket, String[] hosts, boolean resumable) {
        this.endpoint = endpoint;
        this.ticket = ticket;
        this.hosts = hosts;
        this.resumable = resumable;
    }

    @Override
    public String[] preferredLocations() {
        return hosts;
    }
}
