// A real PostgreSQL JDBC client run against `kudusql serve` by tests/wire/test_jdbc.py
// (java JdbcClient.java <port>, the driver jar on the class path). It prints one line per
// fact the test checks: KEY<TAB>value.
import java.math.BigDecimal;
import java.sql.*;

public class JdbcClient {
    static void out(String k, Object v) { System.out.println(k + "\t" + v); }

    public static void main(String[] args) throws Exception {
        String url = "jdbc:postgresql://127.0.0.1:" + args[0] + "/kudusql";
        try (Connection c = DriverManager.getConnection(url, "kudusql", "")) {
            DatabaseMetaData md = c.getMetaData();
            out("product", md.getDatabaseProductName() + " " + md.getDatabaseProductVersion());
            try (Statement s = c.createStatement()) {
                s.execute("CREATE TABLE books (id INT PRIMARY KEY, title STRING NOT NULL, "
                        + "price DECIMAL(8,2), published TIMESTAMP) "
                        + "PARTITION BY HASH (id) PARTITIONS 2");
            }
            // batched inserts through a prepared statement, typed setters
            try (PreparedStatement p = c.prepareStatement(
                    "INSERT INTO books VALUES (?, ?, ?, ?)")) {
                for (int i = 1; i <= 20; i++) {
                    p.setInt(1, i);
                    p.setString(2, "book " + i);
                    p.setBigDecimal(3, new BigDecimal(i + ".25"));
                    p.setTimestamp(4, Timestamp.valueOf("2024-01-0" + (1 + i % 9) + " 10:00:00"));
                    p.addBatch();
                }
                int total = 0;
                for (int n : p.executeBatch()) total += n;
                out("batch_inserted", total);
            }
            // a batch with a duplicate key in the middle (one pipelined run on the wire):
            // the rows before it are applied, it fails, none after it is applied
            try (PreparedStatement p = c.prepareStatement(
                    "INSERT INTO books (id, title) VALUES (?, ?)")) {
                for (int id : new int[] {101, 102, 5, 103}) {
                    p.setInt(1, id);
                    p.setString(2, "batch " + id);
                    p.addBatch();
                }
                try {
                    p.executeBatch();
                    out("batch_duplicate", "no error");
                } catch (BatchUpdateException e) {
                    out("batch_duplicate", e.getSQLState());
                }
            }
            try (Statement s = c.createStatement();
                 ResultSet r = s.executeQuery("SELECT id FROM books WHERE id > 100 ORDER BY id")) {
                StringBuilder sb = new StringBuilder();
                while (r.next()) sb.append(r.getInt(1)).append(',');
                out("batch_applied", sb);
                s.executeUpdate("DELETE FROM books WHERE id > 100");
            }
            // the same prepared query ten times: after prepareThreshold (5) executions the
            // driver switches to a named server-side statement with binary results
            try (PreparedStatement p = c.prepareStatement(
                    "SELECT title, price, published FROM books WHERE id = ?")) {
                StringBuilder sb = new StringBuilder();
                for (int i = 1; i <= 10; i++) {
                    p.setInt(1, i);
                    try (ResultSet r = p.executeQuery()) {
                        r.next();
                        sb.append(r.getString(1)).append('|').append(r.getBigDecimal(2))
                          .append('|').append(r.getTimestamp(3)).append(';');
                    }
                }
                out("prepared_reads", sb);
            }
            // a duplicate key: SQLState 23505
            try (Statement s = c.createStatement()) {
                s.executeUpdate("INSERT INTO books VALUES (1, 'dup', 1.00, NULL)");
                out("duplicate", "no error");
            } catch (SQLException e) {
                out("duplicate", e.getSQLState());
            }
            // metadata: getTables / getColumns / getPrimaryKeys
            try (ResultSet r = md.getTables(null, "public", "%", new String[] {"TABLE"})) {
                StringBuilder sb = new StringBuilder();
                while (r.next()) sb.append(r.getString("TABLE_NAME")).append(',');
                out("tables", sb);
            }
            try (ResultSet r = md.getColumns(null, "public", "books", "%")) {
                StringBuilder sb = new StringBuilder();
                while (r.next())
                    sb.append(r.getString("COLUMN_NAME")).append(':')
                      .append(r.getString("TYPE_NAME")).append(':')
                      .append(r.getString("IS_NULLABLE")).append(',');
                out("columns", sb);
            }
            try (ResultSet r = md.getPrimaryKeys(null, "public", "books")) {
                StringBuilder sb = new StringBuilder();
                while (r.next()) sb.append(r.getString("COLUMN_NAME")).append(',');
                out("primary_key", sb);
            }
            // a cursor: autocommit off + fetch size, so the driver fetches in portions
            c.setAutoCommit(false);
            try (Statement s = c.createStatement()) {
                s.setFetchSize(3);
                long sum = 0;
                int rows = 0;
                try (ResultSet r = s.executeQuery("SELECT id FROM books ORDER BY id")) {
                    while (r.next()) { sum += r.getInt(1); rows++; }
                }
                out("cursor_rows", rows + " " + sum);
            }
            c.commit();
            c.setAutoCommit(true);
            // an error with a position
            try (Statement s = c.createStatement()) {
                s.executeQuery("SELECT nosuch FROM books");
            } catch (SQLException e) {
                out("unknown_column", e.getSQLState());
            }
        }
    }
}
