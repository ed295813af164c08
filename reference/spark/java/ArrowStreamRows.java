package streamwire.spark;

import java.util.Iterator;
import java.util.NoSuchElementException;

import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.execution.arrow.ArrowConverters$;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CloseableIterator;

/**
 * A DataFrame of the rows held in an RDD of Arrow IPC streams, each partition converted in the JVM.
 *
 * <p>streaming_repartition's exchange tasks yield the IPC streams they received; without this helper
 * PySpark can only make them a DataFrame through a second Python pass (createDataFrame of the streams
 * in a binary column, then mapInArrow), because its own Arrow-to-DataFrame path takes batches held by
 * the driver. Built by the Makefile with javac against the pyspark jars (reference/spark/jvm_rows.py).
 */
public final class ArrowStreamRows {
    private ArrowStreamRows() {}

    /** The rows of every stream of {@code streams}, in order, as a DataFrame of {@code schemaJson}. */
    public static Dataset<Row> dataFrame(JavaRDD<byte[]> streams, String schemaJson, SparkSession session) {
        StructType schema = (StructType) DataType.fromJson(schemaJson);
        JavaRDD<InternalRow> rows = streams.mapPartitions(ArrowStreamRows::rowsOf);
        return session.internalCreateDataFrame(rows.rdd(), schema, false);
    }

    /** The rows of each stream in turn; a stream's Arrow memory is released once its rows are read. */
    private static Iterator<InternalRow> rowsOf(Iterator<byte[]> streams) {
        return new Iterator<InternalRow>() {
            private CloseableIterator<InternalRow> current;

            @Override
            public boolean hasNext() {
                while (current == null || !current.hasNext()) {
                    if (current != null) {
                        close(current);
                        current = null;
                    }
                    if (!streams.hasNext()) {
                        return false;
                    }
                    current = ArrowConverters$.MODULE$.fromIPCStream(streams.next())._1();
                }
                return true;
            }

            @Override
            public InternalRow next() {
                if (!hasNext()) {
                    throw new NoSuchElementException();
                }
                return current.next();
            }
        };
    }

    private static void close(CloseableIterator<InternalRow> rows) {
        try {
            rows.close();
        } catch (Exception error) {
            throw new IllegalStateException("could not release an Arrow stream's memory", error);
        }
    }
}
