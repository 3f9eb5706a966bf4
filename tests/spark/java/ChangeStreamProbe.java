package io.kudusql.spark;

import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;

/**
 * The JVM change source's driver without Spark (tests/spark/test_change_offsets.py):
 * KudusqlChangeStream's offset calls driven line by line from stdin, one answer line each
 * ("ERROR " + the message for an exception). Arguments: the table's column names (comma
 * separated), then the data source's options as key=value. Commands:
 * {@code initial}, {@code latest <offset json>}, {@code partitions <start> <end>} (how many
 * partitions the window plans), {@code quit}.
 */
public final class ChangeStreamProbe {
    public static void main(String[] args) throws Exception {
        StructType table = new StructType();
        for (String c : args[0].split(",")) {
            table = table.add(c, DataTypes.StringType, true);
        }
        Map<String, String> opts = new HashMap<>();
        for (int i = 1; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            opts.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        KudusqlChangeStream s = new KudusqlChangeStream(
                Options.of(new CaseInsensitiveStringMap(opts)),
                KudusqlChangeStream.withChangeColumns(table));
        BufferedReader in = new BufferedReader(
                new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null && !line.equals("quit")) {
            String[] w = line.split(" ");
            String out;
            try {
                switch (w[0]) {
                    case "initial" -> out = s.initialOffset().json();
                    case "latest" -> out = s.latestOffset(s.deserializeOffset(w[1]),
                            s.getDefaultReadLimit()).json();
                    case "partitions" -> out = String.valueOf(s.planInputPartitions(
                            s.deserializeOffset(w[1]), s.deserializeOffset(w[2])).length);
                    default -> out = "ERROR unknown command " + w[0];
                }
            } catch (RuntimeException e) {
                out = "ERROR " + e.getMessage().replace('\n', ' ');
            }
            System.out.println(out);
            System.out.flush();
        }
    }
}
