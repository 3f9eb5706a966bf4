package io.kudusql.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;

/**
 * A client of kudusql's Arrow IPC stream endpoint (wire/arrow_stream.py): one TCP
 * connection per request, b"KQS1" + u32 length + JSON; the answer starts with a status
 * byte (0 ok, 1 error: u32 length + JSON {sqlstate, message}). JSON answers are read here;
 * streaming answers ("schema", "scan", "put") hand the connection to the caller.
 */
final class Endpoint implements AutoCloseable {
    static final ObjectMapper JSON = new ObjectMapper();
    private static final byte[] MAGIC = "KQS1".getBytes(StandardCharsets.US_ASCII);
    static final int CONNECT_TIMEOUT_MS = 10_000;
    static final int BUFFER = 1 << 20;

    final String address;
    final Socket socket;
    final DataInputStream in;
    final DataOutputStream out;

    private Endpoint(String address, Socket socket) throws IOException {
        this.address = address;
        this.socket = socket;
        this.in = new DataInputStream(new BufferedInputStream(socket.getInputStream(), BUFFER));
        this.out = new DataOutputStream(new BufferedOutputStream(socket.getOutputStream(), BUFFER));
    }

    /**
     * Connects to the first of "host:port[,host:port...]" that accepts the connection and
     * sends one request; the answer's status is not read yet. A list is how a cluster's
     * tablet servers are named (each serves the endpoint): one that does not answer is
     * skipped (failover at connect; a server failing mid-answer fails the request).
     */
    static Endpoint send(String addresses, ObjectNode request) {
        String[] list = addresses.split(",");
        KudusqlException last = null;
        for (String a : list) {
            try {
                return sendOne(a.trim(), request);
            } catch (KudusqlException e) {
                if (!"08001".equals(e.sqlstate())) {
                    throw e;
                }
                last = e;
            }
        }
        if (list.length > 1) {
            throw new KudusqlException("08001", "cannot reach any kudusql endpoint of "
                    + addresses + "; the last: " + last.reason());
        }
        throw last;
    }

    private static Endpoint sendOne(String address, ObjectNode request) {
        int colon = address.lastIndexOf(':');
        if (colon <= 0) {
            throw new IllegalArgumentException("kudusql: option \"endpoint\" is host:port, not \""
                    + address + "\"");
        }
        String host = address.substring(0, colon);
        int port;
        try {
            port = Integer.parseInt(address.substring(colon + 1));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("kudusql: option \"endpoint\" is host:port, not \""
                    + address + "\"");
        }
        Socket s = new Socket();
        try {
            s.setTcpNoDelay(true);
            s.setReceiveBufferSize(BUFFER);
            s.connect(new InetSocketAddress(host, port), CONNECT_TIMEOUT_MS);
            Endpoint e = new Endpoint(address, s);
            byte[] body = JSON.writeValueAsBytes(request);
            e.out.write(MAGIC);
            e.out.writeInt(body.length);
            e.out.write(body);
            e.out.flush();
            return e;
        } catch (IOException ex) {
            try {
                s.close();
            } catch (IOException ignored) {
                // already failing
            }
            throw unavailable(address, ex);
        }
    }

    /** The error a server that cannot be reached gives (SQLSTATE 08001, as libpq's). */
    static KudusqlException unavailable(String address, IOException ex) {
        return new KudusqlException("08001", "cannot reach the kudusql endpoint at " + address
                + ": " + (ex.getMessage() == null ? ex.getClass().getSimpleName() : ex.getMessage())
                + " (is `kudusql serve` running with its Arrow stream endpoint?)");
    }

    /**
     * Sends a request that is safe to repeat (schema, bind, plan, scan, timestamp) to the
     * first of the addresses that answers it with a status byte: one that refuses the
     * connection or drops it before answering (a server dying) is skipped. The answer's
     * status was OK (an error status is thrown as the server's error, not retried).
     */
    static Endpoint open(String addresses, ObjectNode request) {
        String[] list = addresses.split(",");
        KudusqlException last = null;
        for (String a : list) {
            Endpoint e;
            try {
                e = sendOne(a.trim(), request);
            } catch (KudusqlException ex) {
                if (!"08001".equals(ex.sqlstate())) {
                    throw ex;
                }
                last = ex;
                continue;
            }
            try {
                e.expectOk();
                return e;
            } catch (IOException ex) {
                e.close();
                last = unavailable(a.trim(), ex);
            } catch (RuntimeException ex) {
                e.close();
                throw ex;
            }
        }
        if (list.length > 1) {
            throw new KudusqlException("08001", "cannot reach any kudusql endpoint of "
                    + addresses + "; the last: " + last.reason());
        }
        throw last;
    }

    /** One request with a JSON answer (repeatable: see `open`). */
    static JsonNode call(String addresses, ObjectNode request) {
        try (Endpoint e = open(addresses, request)) {
            return e.readJson();
        } catch (IOException ex) {
            throw unavailable(addresses, ex);
        }
    }

    /** Reads the status byte; on an error status reads and throws the error. */
    void expectOk() throws IOException {
        int status = in.read();
        if (status < 0) {
            throw new IOException("the endpoint closed the connection");
        }
        if (status != 0) {
            throw error(readJson());
        }
    }

    JsonNode readJson() throws IOException {
        int n = in.readInt();
        byte[] b = new byte[n];
        in.readFully(b);
        return JSON.readTree(b);
    }

    static KudusqlException error(JsonNode e) {
        return new KudusqlException(e.path("sqlstate").asText("XX000"),
                e.path("message").asText("internal error"));
    }

    InputStream input() {
        return in;
    }

    OutputStream output() {
        return out;
    }

    @Override
    public void close() {
        try {
            socket.close();
        } catch (IOException ignored) {
            // closing
        }
    }
}
