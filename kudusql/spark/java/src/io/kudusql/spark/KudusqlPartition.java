package io.kudusql.spark;

import org.apache.spark.sql.connector.read.InputPartition;

/** One tablet of a planned scan: where to read it and the endpoint's ticket (JSON). */
final class KudusqlPartition implements InputPartition {
    private static final long serialVersionUID = 1L;

    final String endpoint;
    final String ticket;
    private final String[] hosts;

    KudusqlPartition(String endpoint, String ticket, String[] hosts) {
        this.endpoint = endpoint;
        this.ticket = ticket;
        this.hosts = hosts;
    }

    @Override
    public String[] preferredLocations() {
        return hosts;
    }
}
