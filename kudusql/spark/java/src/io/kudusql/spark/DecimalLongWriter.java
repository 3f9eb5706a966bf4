package io.kudusql.spark;

import org.apache.arrow.vector.DecimalVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.spark.sql.catalyst.expressions.SpecializedGetters;
import org.apache.spark.sql.execution.arrow.ArrowFieldWriter;
import org.apache.spark.sql.execution.arrow.ArrowWriter;
import org.apache.spark.sql.execution.arrow.ArrowWriter$;
import org.apache.spark.sql.types.Decimal;

import java.util.List;

/**
 * Writes a DECIMAL column of precision <= 18 into an Arrow decimal128 vector as its
 * unscaled long (sign-extended to 16 bytes by {@code DecimalVector.setSafe(int, long)}),
 * the mirror of {@link DecimalLongVector}. Spark's own decimal field writer turns every
 * value into a {@code java.math.BigDecimal} and then into bytes; for the compact decimals
 * Spark keeps as longs (TPC-H's DECIMAL(15,2) money columns, four in each lineitem row)
 * that is most of the cost of copying a row into Arrow. The value is brought to the
 * column's precision and scale by {@code Decimal.changePrecision} as Spark's writer does
 * (null when it does not fit, as there).
 */
final class DecimalLongWriter extends ArrowFieldWriter {
    private final DecimalVector vector;
    private final int precision;
    private final int scale;

    DecimalLongWriter(DecimalVector vector) {
        this.vector = vector;
        this.precision = vector.getPrecision();
        this.scale = vector.getScale();
    }

    static boolean fits(FieldVector v) {
        return v instanceof DecimalVector d && d.getPrecision() <= Decimal.MAX_LONG_DIGITS();
    }

    /** Spark's ArrowWriter over `root`, with this writer for its compact decimal columns. */
    static ArrowWriter over(VectorSchemaRoot root) {
        List<FieldVector> vectors = root.getFieldVectors();
        ArrowFieldWriter[] children = new ArrowFieldWriter[vectors.size()];
        for (int i = 0; i < children.length; i++) {
            FieldVector v = vectors.get(i);
            v.allocateNew();
            children[i] = fits(v) ? new DecimalLongWriter((DecimalVector) v)
                    : ArrowWriter$.MODULE$.createFieldWriter(v);
        }
        return new ArrowWriter(root, children);
    }

    @Override
    public DecimalVector valueVector() {
        return vector;
    }

    @Override
    public void setNull() {
        vector.setNull(count());
    }

    @Override
    public void setValue(SpecializedGetters input, int ordinal) {
        Decimal d = input.getDecimal(ordinal, precision, scale);
        if (d.changePrecision(precision, scale)) {
            vector.setSafe(count(), d.toUnscaledLong());
        } else {
            setNull();
        }
    }
}
