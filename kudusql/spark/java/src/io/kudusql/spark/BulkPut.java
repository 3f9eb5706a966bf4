package io.kudusql.spark;

import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.vector.BaseFixedWidthVector;
import org.apache.arrow.vector.BaseLargeVariableWidthVector;
import org.apache.arrow.vector.BaseVariableWidthVector;
import org.apache.arrow.vector.DecimalVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.expressions.objects.AssertNotNull;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.execution.ColumnarToRowExec;
import org.apache.spark.sql.execution.InputAdapter;
import org.apache.spark.sql.execution.ProjectExec;
import org.apache.spark.sql.execution.QueryExecution;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.WholeStageCodegenExec;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DateType;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;

import java.io.IOException;
import java.io.Serializable;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A batch write ({@code df.write.format("kudusql")...save()}) as a V1 write: Spark hands
 * the connector the DataFrame ({@link KudusqlWrite#toInsertableRelation}), as Kudu's
 * connector takes one in {@code KuduContext.insertRows}, and this runs the Spark job that
 * writes it, one put per partition, then sums the tasks' summaries as the DataSource V2
 * commit did ({@link KudusqlWrite#commit}: the same errors, the same row semantics).
 *
 * <p>Why: a DataSource V2 writer receives rows. Reading Parquet (or ORC, or a cached
 * DataFrame), Spark decodes columnar batches, turns each row of them into an UnsafeRow
 * (ColumnarToRow) and the writer copied each value of that row into Arrow vectors through
 * Spark's ArrowWriter, one virtual call per value: most of the JVM's CPU of a load
 * (docs/spark.md, "The load's JVM side: columnar writes"). When the DataFrame's physical plan is a
 * columnar scan under ColumnarToRow, with at most a projection of its columns (the
 * reordering and the NOT NULL checks Spark adds to fit the table's schema:
 * {@code AssertNotNull}), this executes the scan columnar ({@code executeColumnar}) and
 * copies each column of each batch into its Arrow vector in one loop ({@link Copier}), no
 * row in between. Every other plan (a filter, a join, a local relation, a cast, a type
 * without a columnar copy here) is written from its rows as before.
 */
public final class BulkPut {
    private static final AtomicLong COLUMNAR = new AtomicLong();
    private static final AtomicLong ROWS = new AtomicLong();

    private BulkPut() {
    }

    /** Batch writes of this JVM that copied a columnar scan (tests, diagnostics). */
    public static long columnarWrites() {
        return COLUMNAR.get();
    }

    /** Batch writes of this JVM that wrote rows. */
    public static long rowWrites() {
        return ROWS.get();
    }

    /** Writes `data` through the endpoint's puts; the tasks' summaries, unchecked. */
    static WriterCommitMessage[] run(Options options, Dataset<Row> data) {
        QueryExecution qe = ((org.apache.spark.sql.classic.Dataset<Row>) data).queryExecution();
        StructType schema = data.schema();
        Columnar c = columnar(qe.executedPlan(), schema);
        (c != null ? COLUMNAR : ROWS).incrementAndGet();
        List<WriterCommitMessage> out;
        if (c != null) {
            JavaRDD<ColumnarBatch> rdd = c.scan.executeColumnar().toJavaRDD();
            out = rdd.mapPartitions(new ColumnarTask(options, schema, c.columns, c.asserts))
                    .collect();
        } else {
            JavaRDD<InternalRow> rdd = qe.toRdd().toJavaRDD();
            out = rdd.mapPartitions(new RowTask(options, schema)).collect();
        }
        return out.toArray(new WriterCommitMessage[0]);
    }

    /** How a plan's output is read from a columnar scan, or null: from rows. */
    static final class Columnar {
        final SparkPlan scan;
        /** Per output column, the scan's column it is. */
        final int[] columns;
        /** Per output column, Spark's NOT NULL check of it (bound to the scan's row), or null. */
        final Expression[] asserts;

        Columnar(SparkPlan scan, int[] columns, Expression[] asserts) {
            this.scan = scan;
            this.columns = columns;
            this.asserts = asserts;
        }
    }

    /**
     * The columnar form of `plan` (output `schema`): [WholeStageCodegen] [Project] ColumnarToRow
     * over a columnar plan, the projection (if any) only naming the scan's columns, each
     * possibly under Spark's AssertNotNull and aliases, every column of a type
     * {@link Copier} copies. Null otherwise (the caller writes rows).
     */
    static Columnar columnar(SparkPlan plan, StructType schema) {
        for (StructField f : schema.fields()) {
            if (!copies(f.dataType())) {
                return null;
            }
        }
        SparkPlan p = plan instanceof WholeStageCodegenExec w ? w.child() : plan;
        List<NamedExpression> project = null;
        if (p instanceof ProjectExec pr) {
            project = scala.jdk.javaapi.CollectionConverters.asJava(pr.projectList());
            p = pr.child();
        }
        if (!(p instanceof ColumnarToRowExec c2r)) {
            return null;
        }
        SparkPlan scan = c2r.child();
        if (scan instanceof InputAdapter ia) {
            scan = ia.child();
        }
        if (!scan.supportsColumnar()) {
            return null;
        }
        List<Attribute> in = scala.jdk.javaapi.CollectionConverters.asJava(scan.output());
        int n = schema.fields().length;
        int[] columns = new int[n];
        Expression[] asserts = new Expression[n];
        if (project == null) {
            if (in.size() != n) {
                return null;
            }
            for (int i = 0; i < n; i++) {
                columns[i] = i;
            }
        } else {
            if (project.size() != n) {
                return null;
            }
            for (int i = 0; i < n; i++) {
                Expression e = unalias((Expression) project.get(i));
                AssertNotNull check = null;
                if (e instanceof AssertNotNull a) {
                    check = a;
                    e = unalias(a.child());
                }
                if (!(e instanceof AttributeReference ref)) {
                    return null;   // a cast or any other expression: evaluated on rows
                }
                int j = indexOf(in, ref);
                if (j < 0) {
                    return null;
                }
                columns[i] = j;
                if (check != null) {
                    asserts[i] = check.copy(new BoundReference(j, ref.dataType(), true),
                            check.walkedTypePath());
                }
            }
        }
        for (int i = 0; i < n; i++) {
            if (!in.get(columns[i]).dataType().sameType(schema.fields()[i].dataType())) {
                return null;
            }
        }
        return new Columnar(scan, columns, asserts);
    }

    private static Expression unalias(Expression e) {
        while (e instanceof Alias a) {
            e = a.child();
        }
        return e;
    }

    private static int indexOf(List<Attribute> in, AttributeReference ref) {
        for (int j = 0; j < in.size(); j++) {
            if (in.get(j).exprId().equals(ref.exprId())) {
                return j;
            }
        }
        return -1;
    }

    /** Whether {@link Copier} copies a column of this type (else the write goes by rows). */
    static boolean copies(DataType t) {
        return t instanceof BooleanType || t instanceof ByteType || t instanceof ShortType
                || t instanceof IntegerType || t instanceof LongType || t instanceof FloatType
                || t instanceof DoubleType || t instanceof DateType || t instanceof TimestampType
                || t instanceof TimestampNTZType || t instanceof DecimalType
                || t instanceof BinaryType
                || t instanceof StringType;
    }

    /**
     * The task's output metric (the Spark UI's "Output" records, a listener's
     * {@code outputMetrics.recordsWritten}): the rows it sent, as Spark's DataSource V2
     * writing task sets it; this job is the connector's own, so nothing else does.
     */
    static void recordsWritten(WriterCommitMessage m) {
        TaskContext tc = TaskContext.get();
        if (tc != null && m instanceof KudusqlWrite.Summary s) {
            tc.taskMetrics().outputMetrics().setRecordsWritten(s.rows);
        }
    }

    /** One task: its partition's columnar batches through one put. */
    static final class ColumnarTask implements FlatMapFunction<Iterator<ColumnarBatch>,
            WriterCommitMessage> {
        private static final long serialVersionUID = 1L;
        private final Options options;
        private final StructType schema;
        private final int[] columns;
        private final Expression[] asserts;

        ColumnarTask(Options options, StructType schema, int[] columns, Expression[] asserts) {
            this.options = options;
            this.schema = schema;
            this.columns = columns;
            this.asserts = asserts;
        }

        @Override
        public Iterator<WriterCommitMessage> call(Iterator<ColumnarBatch> batches)
                throws IOException {
            KudusqlWrite.Writer w = new KudusqlWrite.Writer(options, schema, null);
            try {
                while (batches.hasNext()) {
                    w.write(batches.next(), columns, asserts);
                }
                WriterCommitMessage m = w.commit();
                recordsWritten(m);
                return Collections.singletonList(m).iterator();
            } catch (Throwable t) {
                w.abort();
                throw t;
            } finally {
                w.close();
            }
        }
    }

    /** One task: its partition's rows through one put (the DataSource V2 writer's way). */
    static final class RowTask implements FlatMapFunction<Iterator<InternalRow>,
            WriterCommitMessage> {
        private static final long serialVersionUID = 1L;
        private final Options options;
        private final StructType schema;

        RowTask(Options options, StructType schema) {
            this.options = options;
            this.schema = schema;
        }

        @Override
        public Iterator<WriterCommitMessage> call(Iterator<InternalRow> rows) throws IOException {
            KudusqlWrite.Writer w = new KudusqlWrite.Writer(options, schema, null);
            try {
                while (rows.hasNext()) {
                    w.write(rows.next());
                }
                WriterCommitMessage m = w.commit();
                recordsWritten(m);
                return Collections.singletonList(m).iterator();
            } catch (Throwable t) {
                w.abort();
                throw t;
            } finally {
                w.close();
            }
        }
    }

    /**
     * Copies rows of a ColumnarBatch into the Arrow vectors of a VectorSchemaRoot (made by
     * ArrowUtils.toArrowSchema from the same Spark schema, as the row writer's: strings and
     * binaries as Arrow's large types, 64-bit offsets), column by
     * column: a loop per column over the rows, the value read from Spark's column vector and
     * set in the Arrow vector (which grows as needed), NULLs as NULLs. DECIMAL(<=18) is
     * copied as its unscaled long (Spark keeps those as ints / longs in its writable
     * vectors), wider ones through BigDecimal, as Spark's own Arrow writer does.
     */
    static final class Copier {
        private final FieldVector[] vectors;
        private final DataType[] types;

        Copier(VectorSchemaRoot root, StructType schema) {
            List<FieldVector> vs = root.getFieldVectors();
            vectors = vs.toArray(new FieldVector[0]);
            types = new DataType[vectors.length];
            for (int i = 0; i < types.length; i++) {
                types[i] = schema.fields()[i].dataType();
            }
        }

        /**
         * Copies `n` rows of `batch` from row `from` to the vectors' rows from `at`: output
         * column i is the batch's column columns[i]; a column with a NOT NULL check
         * (asserts[i]) that holds a NULL in the range raises Spark's own error for it (the
         * check evaluated on that row), before anything of the range is copied.
         */
        void copy(ColumnarBatch batch, int[] columns, Expression[] asserts, int from, int n,
                  int at) {
            for (int i = 0; i < vectors.length; i++) {
                ColumnVector c = batch.column(columns[i]);
                if (asserts[i] != null && c.hasNull()) {
                    for (int r = from; r < from + n; r++) {
                        if (c.isNullAt(r)) {
                            asserts[i].eval(batch.getRow(r));   // throws Spark's error
                        }
                    }
                }
            }
            for (int i = 0; i < vectors.length; i++) {
                copyColumn(vectors[i], types[i], batch.column(columns[i]), from, n, at);
            }
        }

        // Why raw memory: Arrow's setSafe checks the buffer's bounds and reference count
        // (a volatile read) for every value and every validity bit - a third of the
        // task's CPU in a JFR profile of the first version of this class. Here each
        // vector is grown to hold the rows first (reAlloc: the new part zeroed, i.e. NULL),
        // then the values are copied in bulk (getInts/getLongs/... of Spark's vector, then
        // one copyMemory) or, where a value needs work, in a loop per column over the rows.
        private static void copyColumn(FieldVector v, DataType t, ColumnVector c, int from, int n,
                                       int at) {
            if (t instanceof StringType || t instanceof BinaryType) {
                if (v instanceof BaseLargeVariableWidthVector lv) {
                    copyLargeVar(lv, c, t instanceof StringType, from, n, at);
                } else {
                    copyVarSafe(v, c, t instanceof StringType, from, n, at);
                }
                return;
            }
            BaseFixedWidthVector f = (BaseFixedWidthVector) v;
            while (f.getValueCapacity() < at + n) {
                f.reAlloc();
            }
            long data = f.getDataBufferAddress();
            if (t instanceof IntegerType || t instanceof DateType) {
                Platform.copyMemory(c.getInts(from, n), Platform.INT_ARRAY_OFFSET, null,
                        data + (long) at * 4, (long) n * 4);
            } else if (t instanceof LongType || t instanceof TimestampType
                    || t instanceof TimestampNTZType) {
                Platform.copyMemory(c.getLongs(from, n), Platform.LONG_ARRAY_OFFSET, null,
                        data + (long) at * 8, (long) n * 8);
            } else if (t instanceof DoubleType) {
                Platform.copyMemory(c.getDoubles(from, n), Platform.DOUBLE_ARRAY_OFFSET, null,
                        data + (long) at * 8, (long) n * 8);
            } else if (t instanceof FloatType) {
                Platform.copyMemory(c.getFloats(from, n), Platform.FLOAT_ARRAY_OFFSET, null,
                        data + (long) at * 4, (long) n * 4);
            } else if (t instanceof ShortType) {
                Platform.copyMemory(c.getShorts(from, n), Platform.SHORT_ARRAY_OFFSET, null,
                        data + (long) at * 2, (long) n * 2);
            } else if (t instanceof ByteType) {
                Platform.copyMemory(c.getBytes(from, n), Platform.BYTE_ARRAY_OFFSET, null,
                        data + at, n);
            } else if (t instanceof BooleanType) {
                boolean[] b = c.getBooleans(from, n);
                for (int i = 0; i < n; i++) {   // bit-packed: one bit a row
                    if (b[i]) {
                        setBit(data, at + i);
                    }
                }
            } else if (t instanceof DecimalType d) {
                if (!copyCompactDecimal((DecimalVector) v, d, c, from, n, at, data)) {
                    copyDecimalSafe((DecimalVector) v, d, c, from, n, at);
                    return;   // setSafe set the validity bits
                }
            } else {
                throw new IllegalStateException("no columnar copy of " + t);   // see copies()
            }
            setValidity(f.getValidityBufferAddress(), c, from, n, at);
        }

        /** Validity bits of rows at.. for the rows from.. of `c` (the buffer is zeroed). */
        private static void setValidity(long valid, ColumnVector c, int from, int n, int at) {
            if (!c.hasNull()) {
                int i = at;
                int end = at + n;
                while (i < end && (i & 7) != 0) {
                    setBit(valid, i++);
                }
                int bytes = (end - i) >>> 3;
                if (bytes > 0) {
                    Platform.setMemory(valid + (i >>> 3), (byte) 0xFF, bytes);
                    i += bytes << 3;
                }
                while (i < end) {
                    setBit(valid, i++);
                }
                return;
            }
            for (int r = from, o = at; r < from + n; r++, o++) {
                if (!c.isNullAt(r)) {
                    setBit(valid, o);
                }
            }
        }

        private static void setBit(long addr, int i) {
            long a = addr + (i >>> 3);
            Platform.putByte(null, a, (byte) (Platform.getByte(null, a) | (1 << (i & 7))));
        }

        /**
         * DECIMAL(<=18) from Spark's writable vectors, which hold it as an int (<=9 digits)
         * or a long, the unscaled value at the column's own precision and scale: written as
         * the 16-byte little-endian two's complement Arrow's decimal128 is. False (nothing
         * done) for another kind of vector or a wider decimal.
         */
        private static boolean copyCompactDecimal(DecimalVector v, DecimalType d, ColumnVector c,
                                                  int from, int n, int at, long data) {
            if (d.precision() > 18 || !(c instanceof WritableColumnVector)) {
                return false;
            }
            long a = data + (long) at * DecimalVector.TYPE_WIDTH;
            if (d.precision() <= 9) {
                int[] u = c.getInts(from, n);
                for (int i = 0; i < n; i++, a += DecimalVector.TYPE_WIDTH) {
                    Platform.putLong(null, a, u[i]);
                    Platform.putLong(null, a + 8, u[i] >> 31);
                }
            } else {
                long[] u = c.getLongs(from, n);
                for (int i = 0; i < n; i++, a += DecimalVector.TYPE_WIDTH) {
                    Platform.putLong(null, a, u[i]);
                    Platform.putLong(null, a + 8, u[i] >> 63);
                }
            }
            return true;
        }

        /** Other decimals: through Spark's Decimal, per value, as Spark's Arrow writer. */
        private static void copyDecimalSafe(DecimalVector v, DecimalType d, ColumnVector c,
                                            int from, int n, int at) {
            int p = d.precision();
            int s = d.scale();
            for (int r = from, o = at; r < from + n; r++, o++) {
                if (c.isNullAt(r)) {
                    v.setNull(o);
                    continue;
                }
                org.apache.spark.sql.types.Decimal dec = c.getDecimal(r, p, s);
                if (dec == null || !dec.changePrecision(p, s)) {
                    v.setNull(o);   // as Spark's Arrow writer: a value that does not fit
                } else if (p <= 18) {
                    v.setSafe(o, dec.toUnscaledLong());
                } else {
                    v.setSafe(o, dec.toJavaBigDecimal());
                }
            }
        }

        /**
         * Strings / binaries into a large (64-bit offsets) variable-width vector: per row the
         * bytes copied to the data buffer's end (grown as needed), the end offset written,
         * the validity bit set; a NULL repeats the previous offset.
         */
        private static void copyLargeVar(BaseLargeVariableWidthVector v, ColumnVector c,
                                         boolean utf8, int from, int n, int at) {
            while (v.getValueCapacity() < at + n) {
                v.reallocValidityAndOffsetBuffers();
            }
            long valid = v.getValidityBufferAddress();
            long offs = v.getOffsetBufferAddress();
            long pos = Platform.getLong(null, offs + (long) at * 8);
            ArrowBuf buf = v.getDataBuffer();
            long data = buf.memoryAddress();
            long cap = buf.capacity();
            boolean nulls = c.hasNull();
            for (int r = from, o = at; r < from + n; r++, o++) {
                if (!nulls || !c.isNullAt(r)) {
                    Object base;
                    long off;
                    int len;
                    if (utf8) {
                        UTF8String s = c.getUTF8String(r);
                        base = s.getBaseObject();
                        off = s.getBaseOffset();
                        len = s.numBytes();
                    } else {
                        byte[] b = c.getBinary(r);
                        base = b;
                        off = Platform.BYTE_ARRAY_OFFSET;
                        len = b.length;
                    }
                    while (pos + len > cap) {
                        v.reallocDataBuffer();
                        buf = v.getDataBuffer();
                        data = buf.memoryAddress();
                        cap = buf.capacity();
                    }
                    Platform.copyMemory(base, off, null, data + pos, len);
                    pos += len;
                    setBit(valid, o);
                }
                Platform.putLong(null, offs + (long) (o + 1) * 8, pos);
            }
            v.setLastSet(at + n - 1);
        }

        /** Strings / binaries into a 32-bit-offset vector, through setSafe (not used by the
         * writer, whose schema has the large types; kept for a schema that has not). */
        private static void copyVarSafe(FieldVector v, ColumnVector c, boolean utf8, int from,
                                        int n, int at) {
            BaseVariableWidthVector bv = (BaseVariableWidthVector) v;
            for (int r = from, o = at; r < from + n; r++, o++) {
                if (c.isNullAt(r)) {
                    bv.setNull(o);
                } else {
                    bv.setSafe(o, utf8 ? c.getUTF8String(r).getBytes() : c.getBinary(r));
                }
            }
        }
    }
}
