import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.spark.network.TransportContext;
import org.apache.spark.network.client.TransportClient;
import org.apache.spark.network.client.TransportClientFactory;
import org.apache.spark.network.server.TransportServer;
import org.apache.spark.network.shuffle.streaming.DataMessage;
import org.apache.spark.network.shuffle.streaming.ShuffleChecksum;
import org.apache.spark.network.shuffle.streaming.StreamingShuffleMessage;
import org.apache.spark.shuffle.streaming.StreamingShuffleClientHandler;
import org.apache.spark.shuffle.streaming.StreamingShuffleServerHandler;
import org.apache.spark.util.ErrorNotifier;
import scala.runtime.AbstractFunction2;
import scala.runtime.BoxedUnit;

/**
 * The throughput of Spark 4.3.0's own streaming shuffle, one writer to one reader, for the shuffle benchmark's
 * {@code jvm_mb_s} anchor: Spark's {@link StreamingShuffleServerHandler} served by a {@link TransportServer}, its
 * {@link StreamingShuffleClientHandler} on a client from {@link TransportClientFactory} (the conformance
 * adapter's transport settings), checksums on.
 *
 * <p>Transcribed from StreamingShuffleWriter (which needs a SparkEnv and a live task): the byte permits
 * (capacity {@code max(R * N * 2, writerMaxMemory - R * (32 KiB + 512))}, {@code networkBufferSize} held by each
 * DATA until its socket write completes), the sequence numbers, the CRC32C of each payload by Spark's
 * {@link ShuffleChecksum}, the encoding and {@code TransportClient.send}. Not transcribed: serializing rows into
 * the buffer (every DATA carries the same prepared payload), so the figure is the protocol and transport
 * alone. From StreamingShuffleReader: the consuming loop takes each DATA from the handler's queue, verifies its
 * checksum and releases it (returning its bytes to the reader's quota, {@code readerMaxMemory}).
 *
 * <p>Speaks JSON lines: prints {"ready":true}, then for each {"op":"run","messages":n,"warmup":w,"payload":p}
 * sends w + n DATA of p bytes on a fresh writer/reader pair and answers {"mb_s":x,"messages":n}: payload MB per
 * second from the w-th message consumed to the last, so class loading and JIT warm-up are not counted.
 */
public final class SparkShuffleThroughput {
  private static final int WRITER_MAX_MEMORY = 32 * 1024 * 1024;
  private static final long READER_MAX_MEMORY = 32L * 1024 * 1024;

  private SparkShuffleThroughput() {}

  public static void main(String[] args) throws Exception {
    Wire.answerLines(SparkShuffleThroughput::answer,
        e -> Wire.object().put("event", "command_failed").setAll(Wire.describe(e)));
    System.exit(0);
  }

  private static ObjectNode answer(JsonNode request) throws Exception {
    int messages = request.get("messages").asInt();
    if (request.get("warmup").asInt() < 1) {
      throw new IllegalArgumentException("warmup must be at least one message (it starts the clock)");
    }
    double mbS = run(messages, request.get("warmup").asInt(), request.get("payload").asInt());
    return Wire.object().put("mb_s", mbS).put("messages", messages);
  }

  /** Notes the first error any handler reports; the run fails with it. */
  static final class FirstError extends ErrorNotifier {
    final AtomicReference<Throwable> first = new AtomicReference<>();

    @Override
    public void markError(Throwable error) {
      first.compareAndSet(null, error);
      super.markError(error);
    }
  }

  private static double run(int messages, int warmup, int payloadSize) throws Exception {
    int total = warmup + messages;
    FirstError errors = new FirstError();
    StreamingShuffleServerHandler serverHandler = new StreamingShuffleServerHandler(
        new AbstractFunction2<Object, Object, BoxedUnit>() {
          @Override
          public BoxedUnit apply(Object readerId, Object seq) {
            return BoxedUnit.UNIT;
          }
        }, 0, 1, null, errors);
    TransportContext serverContext = new TransportContext(SparkShuffleAdapter.transportConf(null), serverHandler);
    TransportServer server = serverContext.createServer("127.0.0.1", 0, List.of());
    LinkedBlockingQueue<StreamingShuffleMessage> queue = new LinkedBlockingQueue<>();
    StreamingShuffleClientHandler clientHandler =
        new StreamingShuffleClientHandler(0, 0, queue, 0, READER_MAX_MEMORY, null, errors);
    TransportContext clientContext = new TransportContext(SparkShuffleAdapter.transportConf(null), clientHandler);
    TransportClientFactory factory = clientContext.createClientFactory();
    long[] stamps = new long[2];
    CountDownLatch consumed = new CountDownLatch(1);
    Thread consumer = new Thread(() -> consume(queue, total, warmup, stamps, consumed, errors), "consumer");
    consumer.setDaemon(true);
    consumer.start();
    try {
      TransportClient reader = factory.createClient("127.0.0.1", server.getPort());
      TransportClient writer = serverHandler.futureClients()[0].get(60, TimeUnit.SECONDS);
      byte[] payload = new byte[payloadSize];
      new Random(13).nextBytes(payload);
      int capacity = Math.max(2 * payloadSize, WRITER_MAX_MEMORY - (32 * 1024 + 512));
      Semaphore permits = new Semaphore(capacity);
      for (long seq = 0; seq < total && errors.first.get() == null; seq++) {
        permits.acquire(payloadSize);
        ByteBuf data = Unpooled.wrappedBuffer(payload);
        ShuffleChecksum crc = new ShuffleChecksum();
        crc.updateChecksum(data, 0, payloadSize);
        DataMessage message = new DataMessage(0, 0, payloadSize, data, crc.getValue());
        message.setSeqNum(seq);
        ByteBuf body = Wire.encodeBody(message);
        message.release();
        writer.send(body).addListener(future -> {
          permits.release(payloadSize);
          if (!future.isSuccess()) {
            errors.markError(future.cause());
          }
        });
      }
      if (!consumed.await(600, TimeUnit.SECONDS) || errors.first.get() != null) {
        Throwable error = errors.first.get();
        throw new IllegalStateException(error == null ? "the reader did not consume every message" : error.toString());
      }
      reader.close();
    } finally {
      consumer.interrupt();
      factory.close();
      server.close();
      clientContext.close();
      serverContext.close();
    }
    double seconds = (stamps[1] - stamps[0]) / 1e9;
    return (double) messages * payloadSize / (1 << 20) / seconds;
  }

  /** StreamingShuffleReader's loop for one writer: take, verify the checksum, release; stamp the window. */
  private static void consume(LinkedBlockingQueue<StreamingShuffleMessage> queue, int total, int warmup,
      long[] stamps, CountDownLatch consumed, FirstError errors) {
    try {
      for (int count = 1; count <= total; count++) {
        StreamingShuffleMessage message = queue.take();
        if (message instanceof DataMessage) {
          DataMessage data = (DataMessage) message;
          ShuffleChecksum crc = new ShuffleChecksum();
          crc.updateChecksum(data.data, data.data.readerIndex(), data.data.readableBytes());
          if (crc.getValue() != data.checksum) {
            errors.markError(new IllegalStateException("checksum mismatch at seq " + data.getSeqNum()));
          }
        }
        message.release();
        if (count == warmup) {
          stamps[0] = System.nanoTime();
        }
      }
      stamps[1] = System.nanoTime();
      consumed.countDown();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
