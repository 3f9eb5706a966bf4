package io.kudusql.spark;

import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.vector.DecimalVector;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarMap;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A DECIMAL column of precision <= 18 over an Arrow decimal128 vector, read as Spark reads
 * such decimals from Parquet: the unscaled value as a long (the low 8 bytes of the
 * little-endian 16-byte value; with <= 18 digits the high 8 are its sign) into
 * {@code Decimal.createUnsafe} — no BigDecimal per value, as ArrowColumnVector's decimal
 * accessor makes (TPC-H's money columns are DECIMAL(15,2)). Zero copy: reads the
 * vector's buffers where the IPC reader loaded them.
 */
final class DecimalLongVector extends ColumnVector {
    private final DecimalVector vector;

    DecimalLongVector(DataType type, DecimalVector vector) {
        super(type);
        this.vector = vector;
    }

    static boolean fits(org.apache.spark.sql.types.DecimalType t) {
        return t.precision() <= Decimal.MAX_LONG_DIGITS();
    }

    @Override
    public void close() {
        // the stream reader owns the vector
    }

    @Override
    public boolean hasNull() {
        return vector.getNullCount() > 0;
    }

    @Override
    public int numNulls() {
        return vector.getNullCount();
    }

    @Override
    public boolean isNullAt(int rowId) {
        return vector.isNull(rowId);
    }

    @Override
    public Decimal getDecimal(int rowId, int precision, int scale) {
        if (vector.isNull(rowId)) {
            return null;
        }
        ArrowBuf data = vector.getDataBuffer();
        return Decimal.createUnsafe(data.getLong((long) rowId * DecimalVector.TYPE_WIDTH),
                precision, scale);
    }

    private static UnsupportedOperationException notDecimal() {
        return new UnsupportedOperationException("a DECIMAL column");
    }

    @Override
    public boolean getBoolean(int rowId) {
        throw notDecimal();
    }

    @Override
    public byte getByte(int rowId) {
        throw notDecimal();
    }

    @Override
    public short getShort(int rowId) {
        throw notDecimal();
    }

    @Override
    public int getInt(int rowId) {
        throw notDecimal();
    }

    @Override
    public long getLong(int rowId) {
        throw notDecimal();
    }

    @Override
    public float getFloat(int rowId) {
        throw notDecimal();
    }

    @Override
    public double getDouble(int rowId) {
        throw notDecimal();
    }

    @Override
    public ColumnarArray getArray(int rowId) {
        throw notDecimal();
    }

    @Override
    public ColumnarMap getMap(int rowId) {
        throw notDecimal();
    }

    @Override
    public UTF8String getUTF8String(int rowId) {
        throw notDecimal();
    }

    @Override
    public byte[] getBinary(int rowId) {
        throw notDecimal();
    }

    @Override
    public ColumnVector getChild(int ordinal) {
        throw notDecimal();
    }
}
