import java.nio.ByteBuffer;
import java.time.Instant;
import org.apache.spark.sql.ForeachWriter;
import org.apache.spark.sql.Row;

/**
 * The sink of the real-time-mode benchmark ({@code benchmarks/rtm.py}): stamps each row's arrival in the JVM,
 * so a Python sink's own speed (a few thousand rows/s) neither bounds the rate nor adds to the latency.
 *
 * <p>Rows are {@code (key int, seq long, sent_us long)}; {@code sent_us} is the feeder's wall clock in µs since
 * the epoch when the row was offered, and the arrival is read from the same clock ({@link Instant#now()}, µs on
 * Linux). In local mode every task runs in the driver's JVM, so the arrivals are kept in one static store that
 * the benchmark drains through the Py4J gateway as big-endian {@code (seq, sent_us, arrived_us)} triples.
 */
public final class RealTimeArrivals extends ForeachWriter<Row> {
    private static final long serialVersionUID = 1L;
    private static final Object LOCK = new Object();
    private static long[] triples = new long[3 * 4096];
    private static int size;
    private static long count;

    @Override
    public boolean open(long partitionId, long epochId) {
        return true;
    }

    @Override
    public void process(Row row) {
        Instant now = Instant.now();
        long arrived = now.getEpochSecond() * 1_000_000L + now.getNano() / 1_000;
        long seq = row.getLong(row.fieldIndex("seq"));
        long sent = row.getLong(row.fieldIndex("sent_us"));
        synchronized (LOCK) {
            if (size + 3 > triples.length) {
                long[] grown = new long[triples.length * 2];
                System.arraycopy(triples, 0, grown, 0, size);
                triples = grown;
            }
            triples[size++] = seq;
            triples[size++] = sent;
            triples[size++] = arrived;
            count++;
        }
    }

    @Override
    public void close(Throwable error) {
    }

    /** Rows arrived since the JVM started. */
    public static long count() {
        synchronized (LOCK) {
            return count;
        }
    }

    /** The arrivals kept since the last drain, as big-endian (seq, sent_us, arrived_us) triples; forgets them. */
    public static byte[] drain() {
        synchronized (LOCK) {
            ByteBuffer out = ByteBuffer.allocate(size * Long.BYTES);
            out.asLongBuffer().put(triples, 0, size);
            size = 0;
            return out.array();
        }
    }
}
