package streamwire.spark;

import java.util.Iterator;
import java.util.NoSuchElementException;

import org.apache.spark.TaskContext;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.execution.arrow.ArrowConverters$;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CloseableIterator;
import org.apache.spark.util.TaskCompletionListener;

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
        JavaRDD<InternalRow> rows = streams.mapPartitions(StreamRows::new);
        return session.internalCreateDataFrame(rows.rdd(), schema, false);
    }

    /**
     * The rows of each stream in turn. A stream's Arrow memory is released once its rows are read, or
     * when the task ends first (a limit, a failure).
     */
    private static final class StreamRows implements Iterator<InternalRow>, TaskCompletionListener {
        private final Iterator<byte[]> streams;
        private CloseableIterator<InternalRow> current;

        StreamRows(Iterator<byte[]> streams) {
            this.streams = streams;
            TaskContext context = TaskContext.get();
            if (context != null) {
                context.addTaskCompletionListener(this);
            }
        }

        @Override
        public boolean hasNext() {
            while (current == null || !current.hasNext()) {
                release();
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

        @Override
        public void onTaskCompletion(TaskContext context) {
            release();
        }

        private void release() {
            if (current == null) {
                return;
            }
            CloseableIterator<InternalRow> rows = current;
            current = null;
            try {
                rows.close();
            } catch (Exception error) {
                throw new IllegalStateException("could not release an Arrow stream's memory", error);
            }
        }
    }
}
