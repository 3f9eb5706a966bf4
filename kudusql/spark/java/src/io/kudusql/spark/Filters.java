package io.kudusql.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.spark.sql.sources.And;
import org.apache.spark.sql.sources.EqualNullSafe;
import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThan;
import org.apache.spark.sql.sources.GreaterThanOrEqual;
import org.apache.spark.sql.sources.In;
import org.apache.spark.sql.sources.IsNotNull;
import org.apache.spark.sql.sources.IsNull;
import org.apache.spark.sql.sources.LessThan;
import org.apache.spark.sql.sources.LessThanOrEqual;
import org.apache.spark.sql.sources.Not;
import org.apache.spark.sql.sources.Or;
import org.apache.spark.sql.types.StructType;

import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/**
 * Spark filters as kudusql ColumnPredicates (JSON, wire/flight.py predicate_to_json), only
 * where kudusql evaluates them exactly as Spark does: =, <, <=, >, >=, <=>, IN, IS [NOT]
 * NULL on a top-level column with a literal of a type kudusql compares the same way;
 * NOT of IS [NOT] NULL; OR of equalities / INs on one column (one IN). An AND pushes each
 * side it can (the AND stays with Spark unless both sides went). Floating-point NaN
 * literals are not pushed, nor lower bounds (>, >=, =) on FLOAT / DOUBLE columns; equality
 * goes as IN, where a zero stands for both 0.0 and -0.0. Both rules date from when
 * kudusql's scan predicates used IEEE order (NaN matched no range, the hashed IN told
 * -0.0 from 0.0); the engine now orders floats as Spark does, so they are conservative,
 * not needed for exactness. Everything else stays in Spark
 * (tests/spark/test_float_filters.py checks both readers against Spark over the same rows
 * in memory).
 */
final class Filters {
    private static final JsonNodeFactory F = JsonNodeFactory.instance;

    private Filters() {
    }

    /** The predicates equivalent to `f` (their AND), or null if `f` is not exactly pushable. */
    static List<ObjectNode> convert(Filter f, StructType schema) {
        if (f instanceof And a) {
            List<ObjectNode> l = convert(a.left(), schema);
            List<ObjectNode> r = convert(a.right(), schema);
            if (l == null || r == null) {
                return null;
            }
            List<ObjectNode> out = new ArrayList<>(l);
            out.addAll(r);
            return out;
        }
        ObjectNode p = one(f, schema);
        return p == null ? null : List.of(p);
    }

    /** The pushable parts of `f` (each implied by f): a superset filter; empty if none. */
    static List<ObjectNode> implied(Filter f, StructType schema) {
        if (f instanceof And a) {
            List<ObjectNode> out = new ArrayList<>(implied(a.left(), schema));
            out.addAll(implied(a.right(), schema));
            return out;
        }
        ObjectNode p = one(f, schema);
        return p == null ? List.of() : List.of(p);
    }

    private static boolean column(String attr, StructType schema) {
        for (String n : schema.fieldNames()) {
            if (n.equals(attr)) {
                return true;
            }
        }
        return false;
    }

    private static ObjectNode one(Filter f, StructType schema) {
        if (f instanceof EqualTo e) {
            return equal(e.attribute(), e.value(), schema);
        }
        if (f instanceof EqualNullSafe e) {
            return e.value() == null ? nullness(e.attribute(), "is_null", schema)
                    : equal(e.attribute(), e.value(), schema);
        }
        if (f instanceof GreaterThan g) {
            return range(g.attribute(), g.value(), null, false, false, schema);
        }
        if (f instanceof GreaterThanOrEqual g) {
            return range(g.attribute(), g.value(), null, true, false, schema);
        }
        if (f instanceof LessThan l) {
            return range(l.attribute(), null, l.value(), true, false, schema);
        }
        if (f instanceof LessThanOrEqual l) {
            return range(l.attribute(), null, l.value(), true, true, schema);
        }
        if (f instanceof In in) {
            return in(in.attribute(), List.of(in.values()), schema);
        }
        if (f instanceof IsNull n) {
            return nullness(n.attribute(), "is_null", schema);
        }
        if (f instanceof IsNotNull n) {
            return nullness(n.attribute(), "is_not_null", schema);
        }
        if (f instanceof Not n) {
            if (n.child() instanceof IsNull c) {
                return nullness(c.attribute(), "is_not_null", schema);
            }
            if (n.child() instanceof IsNotNull c) {
                return nullness(c.attribute(), "is_null", schema);
            }
            return null;
        }
        if (f instanceof Or o) {
            // a = 1 OR a IN (2, 3) -> a IN (1, 2, 3): exact (NULLs never match either form)
            String[] attr = new String[1];
            List<Object> vals = new ArrayList<>();
            if (!equalities(o, attr, vals)) {
                return null;
            }
            return in(attr[0], vals, schema);
        }
        return null;
    }

    private static boolean equalities(Filter f, String[] attr, List<Object> vals) {
        String a;
        if (f instanceof Or o) {
            return equalities(o.left(), attr, vals) && equalities(o.right(), attr, vals);
        } else if (f instanceof EqualTo e) {
            a = e.attribute();
            vals.add(e.value());
        } else if (f instanceof In in) {
            a = in.attribute();
            vals.addAll(List.of(in.values()));
        } else {
            return false;
        }
        if (attr[0] == null) {
            attr[0] = a;
        }
        return attr[0].equals(a);
    }

    private static boolean floating(String attr, StructType schema) {
        org.apache.spark.sql.types.DataType t = schema.apply(attr).dataType();
        return t instanceof org.apache.spark.sql.types.DoubleType
                || t instanceof org.apache.spark.sql.types.FloatType;
    }

    private static ObjectNode base(String attr, String kind, StructType schema) {
        if (!column(attr, schema)) {
            return null;
        }
        ObjectNode p = F.objectNode();
        p.put("column", attr);
        p.put("kind", kind);
        return p;
    }

    private static ObjectNode equal(String attr, Object v, StructType schema) {
        if (v == null) {
            return null;
        }
        if (column(attr, schema) && floating(attr, schema)) {
            return in(attr, List.of(v), schema);
        }
        return range(attr, v, v, true, true, schema);
    }

    private static ObjectNode nullness(String attr, String kind, StructType schema) {
        return base(attr, kind, schema);
    }

    private static ObjectNode range(String attr, Object lo, Object hi, boolean li, boolean ui,
                                    StructType schema) {
        ObjectNode p = base(attr, "range", schema);
        if (p == null) {
            return null;
        }
        if (lo != null && floating(attr, schema)) {
            // Spark orders NaN above every number (NaN > 1 is true); kudusql's range
            // predicates leave NaN out: a lower bound on a FLOAT / DOUBLE stays in Spark
            return null;
        }
        JsonNode l = lo == null ? F.nullNode() : value(lo);
        JsonNode u = hi == null ? F.nullNode() : value(hi);
        if (l == null || u == null) {
            return null;
        }
        p.set("lower", l);
        p.set("upper", u);
        p.put("lower_inclusive", li);
        p.put("upper_inclusive", ui);
        return p;
    }

    private static ObjectNode in(String attr, List<Object> values, StructType schema) {
        ObjectNode p = base(attr, "in", schema);
        if (p == null) {
            return null;
        }
        ArrayNode vs = p.putArray("values");
        Set<String> seen = new LinkedHashSet<>();
        for (Object v : values) {
            if (v == null) {
                continue; // NULL in an IN list never matches
            }
            JsonNode j = value(v);
            if (j == null) {
                return null;
            }
            if (seen.add(j.toString())) {
                vs.add(j);
            }
            if (j.isDouble() && j.asDouble() == 0.0) {
                // both zeros (conservative since the engine's IN holds -0.0 = 0.0)
                JsonNode other = F.numberNode(1.0 / j.asDouble() > 0 ? -0.0 : 0.0);
                if (seen.add(other.toString())) {
                    vs.add(other);
                }
            }
        }
        return vs.isEmpty() ? null : p;
    }

    /** A literal in the endpoint's JSON form, or null if it cannot be pushed exactly. */
    static JsonNode value(Object v) {
        if (v instanceof String s) {
            return F.textNode(s);
        }
        if (v instanceof Boolean b) {
            return F.booleanNode(b);
        }
        if (v instanceof Byte || v instanceof Short || v instanceof Integer || v instanceof Long) {
            return F.numberNode(((Number) v).longValue());
        }
        if (v instanceof Double d) {
            return d.isNaN() || d.isInfinite() ? null : F.numberNode(d);
        }
        if (v instanceof Float x) {
            // the float's exact value as a double (Spark compares FLOAT columns as floats)
            return x.isNaN() || x.isInfinite() ? null : F.numberNode(x.doubleValue());
        }
        if (v instanceof BigDecimal d) {
            return F.objectNode().put("$decimal", d.toPlainString());
        }
        if (v instanceof java.time.LocalDate d) {
            return F.objectNode().put("$date", d.toString());
        }
        if (v instanceof java.sql.Date d) {
            return F.objectNode().put("$date", d.toLocalDate().toString());
        }
        if (v instanceof java.time.LocalDateTime t) {
            return F.objectNode().put("$timestamp", t.toString());
        }
        if (v instanceof byte[] b) {
            return F.objectNode().put("$bytes", Base64.getEncoder().encodeToString(b));
        }
        // java.sql.Timestamp / Instant: a TIMESTAMP WITH TIME ZONE literal; kudusql's
        // TIMESTAMP columns are read as TIMESTAMP_NTZ, so such filters stay in Spark.
        return null;
    }
}
