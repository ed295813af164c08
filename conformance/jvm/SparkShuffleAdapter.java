import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.io.BufferedReader;
import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.spark.network.TransportContext;
import org.apache.spark.network.client.TransportClient;
import org.apache.spark.network.client.TransportClientFactory;
import org.apache.spark.network.server.TransportServer;
import org.apache.spark.network.shuffle.streaming.DataMessage;
import org.apache.spark.network.shuffle.streaming.ShuffleChecksum;
import org.apache.spark.network.shuffle.streaming.StreamingShuffleMessage;
import org.apache.spark.network.shuffle.streaming.StreamingShuffleMessageType;
import org.apache.spark.network.shuffle.streaming.TerminationControlMessage;
import org.apache.spark.network.util.MapConfigProvider;
import org.apache.spark.network.util.TransportConf;
import org.apache.spark.shuffle.streaming.StreamingShuffleClientHandler;
import org.apache.spark.shuffle.streaming.StreamingShuffleManager$;
import org.apache.spark.shuffle.streaming.StreamingShuffleServerHandler;
import org.apache.spark.util.ErrorNotifier;
import scala.runtime.AbstractFunction1;
import scala.runtime.AbstractFunction2;
import scala.runtime.BoxedUnit;

/**
 * Spark 4.3.0's real streaming-shuffle handlers on Spark's real transport, driven over JSON lines, so the
 * conformance suite can test Spark itself.
 *
 * <p>{@code writer WRITER_ID NUM_READERS SHUFFLE_ID CONNECTION_TIMEOUT_MS CHECKSUM}: Spark as the writer side.
 * A {@link StreamingShuffleServerHandler} served by a {@link TransportServer} on 127.0.0.1, port 0. The
 * handler's bind futures, the ack callback and the ErrorNotifier are Spark's; StreamingShuffleWriter itself
 * needs a SparkEnv, a ShuffleHandle and a live task, so its send path (ShardState.send: seq numbering, the
 * pre-bind queue chained on the bind future, the connection timeout) and its ack check
 * (onTerminationAckReceived) are transcribed here from its bytecode, raising Spark's own exceptions.
 * Commands: {"op":"data","reader_id":r,"payload":hex} (checksum by ShuffleChecksum when CHECKSUM, else 0),
 * {"op":"terminate","reader_id":r}. Events: ready(port), bound, written, ack, all_acks, error.
 *
 * <p>{@code reader HOST PORT WRITER_ID READER_ID SHUFFLE_ID QUOTA_BYTES CHECKSUM MANUAL}: Spark as the reader
 * side. A {@link StreamingShuffleClientHandler} on a client from {@link TransportClientFactory}; a consumer
 * thread takes from its queue as StreamingShuffleReader does (checksum verification transcribed, using
 * Spark's ShuffleChecksum and condition) and releases each DATA (returning quota) unless MANUAL, in which
 * case {"op":"consume","count":n} releases the oldest n. Events: ready, connected, data, termination,
 * ack_written, closed, error.
 *
 * <p>End of stdin shuts everything down and exits.
 */
public final class SparkShuffleAdapter {
  private SparkShuffleAdapter() {}

  public static void main(String[] args) throws Exception {
    Wire.reserveStdout();
    if (args.length > 0 && args[0].equals("writer")) {
      new WriterSide(Integer.parseInt(args[1]), Integer.parseInt(args[2]), Integer.parseInt(args[3]),
          Long.parseLong(args[4]), Boolean.parseBoolean(args[5])).run();
    } else if (args.length > 0 && args[0].equals("reader")) {
      new ReaderSide(args[1], Integer.parseInt(args[2]), Integer.parseInt(args[3]), Integer.parseInt(args[4]),
          Integer.parseInt(args[5]), Long.parseLong(args[6]), Boolean.parseBoolean(args[7]),
          Boolean.parseBoolean(args[8])).run();
    } else {
      throw new IllegalArgumentException("usage: SparkShuffleAdapter writer|reader ...");
    }
    System.exit(0);
  }

  static TransportConf transportConf() {
    Map<String, String> settings = new HashMap<>();
    settings.put("spark.shuffle.io.mode", "NIO");
    settings.put("spark.shuffle.io.serverThreads", "2");
    settings.put("spark.shuffle.io.clientThreads", "2");
    return new TransportConf("shuffle", new MapConfigProvider(settings));
  }

  static ObjectNode event(String name) {
    return Wire.object().put("event", name);
  }

  /** Spark's ErrorNotifier, reporting every error it is given. */
  static final class ReportingNotifier extends ErrorNotifier {
    @Override
    public void markError(Throwable error) {
      Throwable cause = error;
      while (cause instanceof java.util.concurrent.CompletionException && cause.getCause() != null) {
        cause = cause.getCause();
      }
      ObjectNode line = event("error");
      line.setAll(Wire.describe(cause));
      Wire.emit(line);
      super.markError(error);
    }
  }

  static final class WriterSide {
    private final int writerId;
    private final int numReaders;
    private final int shuffleId;
    private final long connectionTimeoutMs;
    private final boolean checksumEnabled;
    private final ErrorNotifier notifier = new ReportingNotifier();
    private final AtomicLong[] lastSent;
    private final AtomicBoolean[] ackReceived;
    private final Object[] clients;
    private final StreamingShuffleServerHandler handler;
    private int acks;

    WriterSide(int writerId, int numReaders, int shuffleId, long connectionTimeoutMs, boolean checksumEnabled) {
      this.writerId = writerId;
      this.numReaders = numReaders;
      this.shuffleId = shuffleId;
      this.connectionTimeoutMs = connectionTimeoutMs;
      this.checksumEnabled = checksumEnabled;
      this.lastSent = new AtomicLong[numReaders];
      this.ackReceived = new AtomicBoolean[numReaders];
      this.clients = new Object[numReaders];
      this.handler = new StreamingShuffleServerHandler(new AbstractFunction2<Object, Object, BoxedUnit>() {
        @Override
        public BoxedUnit apply(Object readerId, Object seq) {
          onTerminationAckReceived((Integer) readerId, (Long) seq);
          return BoxedUnit.UNIT;
        }
      }, shuffleId, numReaders, null, notifier);
    }

    /** StreamingShuffleWriter.onTerminationAckReceived, transcribed: check the seq first, count once. */
    private void onTerminationAckReceived(int readerId, long seq) {
      long expected = lastSent[readerId].get();
      if (expected != seq) {
        throw StreamingShuffleManager$.MODULE$.streamingShuffleIncorrectSequenceNumber(
            StreamingShuffleMessageType.TERMINATION_ACK_MESSAGE, writerId, readerId, expected, seq);
      }
      boolean counted = ackReceived[readerId].compareAndSet(false, true);
      Wire.emit(event("ack").put("reader_id", readerId).put("seq", Long.toString(seq)).put("counted", counted));
      if (counted) {
        synchronized (this) {
          acks += 1;
          if (acks == numReaders) {
            Wire.emit(event("all_acks"));
          }
        }
      }
    }

    /** ShardState's constructor, transcribed: the bind future, with Spark's timeout when one is set. */
    private CompletableFuture<TransportClient> bindFuture(int readerId) {
      CompletableFuture<TransportClient> bound = handler.futureClients()[readerId];
      bound.thenAccept(client -> Wire.emit(event("bound").put("reader_id", readerId)
          .put("remote", String.valueOf(client.getSocketAddress()))));
      if (connectionTimeoutMs == -1) {
        return bound;
      }
      return bound.orTimeout(connectionTimeoutMs, TimeUnit.MILLISECONDS).exceptionally(t -> {
        if (t instanceof TimeoutException) {
          throw StreamingShuffleManager$.MODULE$.streamingShuffleWriterConnectionTimeout(
              shuffleId, writerId, readerId, connectionTimeoutMs);
        }
        throw t instanceof RuntimeException ? (RuntimeException) t : new RuntimeException(t);
      });
    }

    /** ShardState.send, transcribed: number, encode, then send now or chain on the bind future. */
    @SuppressWarnings("unchecked")
    private synchronized void send(int readerId, StreamingShuffleMessage message) {
      long seq = lastSent[readerId].incrementAndGet();
      message.setSeqNum(seq);
      ByteBuf buf = Wire.encodeBody(message);
      message.release();
      String type = message.messageType().name();
      Object client = clients[readerId];
      if (client instanceof TransportClient) {
        write((TransportClient) client, buf, readerId, seq, type);
        return;
      }
      CompletableFuture<TransportClient> chained = ((CompletableFuture<TransportClient>) client)
          .whenComplete((c, error) -> {
            if (error == null) {
              write(c, buf, readerId, seq, type);
            } else {
              buf.release();
              notifier.markError(error);
            }
          });
      clients[readerId] = chained.isDone() && !chained.isCompletedExceptionally() ? chained.join() : chained;
    }

    private void write(TransportClient client, ByteBuf buf, int readerId, long seq, String type) {
      client.send(buf).addListener(future -> {
        if (!future.isSuccess()) {
          notifier.markError(future.cause());
        }
        Wire.emit(event("written").put("reader_id", readerId).put("seq", Long.toString(seq)).put("type", type)
            .put("ok", future.isSuccess()));
      });
    }

    void run() throws Exception {
      for (int r = 0; r < numReaders; r++) {
        lastSent[r] = new AtomicLong(-1);
        ackReceived[r] = new AtomicBoolean(false);
        clients[r] = bindFuture(r);
      }
      TransportContext context = new TransportContext(transportConf(), handler);
      TransportServer server = context.createServer("127.0.0.1", 0, List.of());
      Wire.emit(Wire.object().put("ready", true).put("role", "writer").put("port", server.getPort()));
      BufferedReader in = Wire.stdin();
      try {
        for (String line = in.readLine(); line != null; line = in.readLine()) {
          if (!line.isBlank()) {
            command(Wire.JSON.readTree(line));
          }
        }
      } finally {
        server.close();
        context.close();
      }
    }

    private void command(JsonNode request) {
      String op = request.get("op").asText();
      int readerId = request.get("reader_id").asInt();
      try {
        if (op.equals("data")) {
          byte[] payload = Wire.unhex(request.get("payload").asText());
          ByteBuf data = Unpooled.wrappedBuffer(payload);
          long checksum = 0;
          if (checksumEnabled) {
            ShuffleChecksum crc = new ShuffleChecksum();
            crc.updateChecksum(data, 0, payload.length);
            checksum = crc.getValue();
          }
          send(readerId, new DataMessage(writerId, readerId, payload.length, data, checksum));
        } else if (op.equals("terminate")) {
          send(readerId, new TerminationControlMessage(writerId, readerId));
        } else {
          throw new IllegalArgumentException("unknown op " + op);
        }
      } catch (RuntimeException e) {
        ObjectNode line = event("command_failed");
        line.setAll(Wire.describe(e));
        Wire.emit(line);
      }
    }
  }

  static final class ReaderSide {
    private final String host;
    private final int port;
    private final int writerId;
    private final int readerId;
    private final int shuffleId;
    private final long quota;
    private final boolean checksumEnabled;
    private final boolean manual;
    private final ErrorNotifier notifier = new ReportingNotifier();
    private final LinkedBlockingQueue<StreamingShuffleMessage> queue = new LinkedBlockingQueue<>();
    private final ArrayDeque<DataMessage> held = new ArrayDeque<>();

    ReaderSide(String host, int port, int writerId, int readerId, int shuffleId, long quota,
        boolean checksumEnabled, boolean manual) {
      this.host = host;
      this.port = port;
      this.writerId = writerId;
      this.readerId = readerId;
      this.shuffleId = shuffleId;
      this.quota = quota;
      this.checksumEnabled = checksumEnabled;
      this.manual = manual;
    }

    void run() throws Exception {
      StreamingShuffleClientHandler handler = new StreamingShuffleClientHandler(
          writerId, readerId, queue, shuffleId, quota, null, notifier) {
        @Override
        public void channelInactive(TransportClient client) {
          super.channelInactive(client);
          Wire.emit(event("closed").put("writer_id", writerId));
        }
      };
      handler.setOnTermAckResponseHandler(new AbstractFunction1<Object, BoxedUnit>() {
        @Override
        public BoxedUnit apply(Object writer) {
          Wire.emit(event("ack_written").put("writer_id", (Integer) writer));
          return BoxedUnit.UNIT;
        }
      });
      Thread consumer = new Thread(this::consume, "streaming-shuffle-consumer");
      consumer.setDaemon(true);
      consumer.start();
      TransportContext context = new TransportContext(transportConf(), handler);
      TransportClientFactory factory = context.createClientFactory();
      Wire.emit(Wire.object().put("ready", true).put("role", "reader"));
      TransportClient client = null;
      try {
        client = factory.createClient(host, port);
        Wire.emit(event("connected").put("local", String.valueOf(client.getChannel().localAddress())));
      } catch (Exception e) {
        ObjectNode line = event("connect_failed");
        line.setAll(Wire.describe(e));
        Wire.emit(line);
      }
      BufferedReader in = Wire.stdin();
      try {
        for (String line = in.readLine(); line != null; line = in.readLine()) {
          if (!line.isBlank()) {
            JsonNode request = Wire.JSON.readTree(line);
            if (request.get("op").asText().equals("consume")) {
              release(request.get("count").asInt());
            }
          }
        }
      } finally {
        if (client != null) {
          client.close();
        }
        factory.close();
        context.close();
      }
    }

    private synchronized void release(int count) {
      for (int i = 0; i < count && !held.isEmpty(); i++) {
        held.pollFirst().release();
      }
    }

    /** StreamingShuffleReader's consuming loop, reduced to one writer: verify, report, release. */
    private void consume() {
      try {
        while (true) {
          StreamingShuffleMessage message = queue.take();
          if (message instanceof DataMessage) {
            DataMessage data = (DataMessage) message;
            if (!verified(data)) {
              continue;
            }
            ByteBuf payload = data.getRecordData();
            Wire.emit(event("data").put("writer_id", data.shuffleWriterId).put("seq", Long.toString(data.getSeqNum()))
                .put("checksum", Long.toString(data.checksum)).put("payload", Wire.hex(Wire.bytes(payload))));
            synchronized (this) {
              held.addLast(data);
            }
            if (!manual) {
              release(1);
            }
          } else {
            Wire.emit(event("termination").put("writer_id", StreamingShuffleManager$.MODULE$.getWriterId(message))
                .put("seq", Long.toString(message.getSeqNum())));
          }
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      } catch (RuntimeException e) {
        notifier.markError(e);
      }
    }

    /** StreamingShuffleReader.verifyDataMessageChecksum, transcribed (same class, same condition). */
    private boolean verified(DataMessage message) {
      if (!checksumEnabled) {
        return true;
      }
      ByteBuf data = message.data;
      ShuffleChecksum crc = new ShuffleChecksum();
      crc.updateChecksum(data, data.readerIndex(), data.readableBytes());
      long calculated = crc.getValue();
      if (message.checksum == calculated) {
        return true;
      }
      Map<String, String> parameters = new HashMap<>();
      parameters.put("writerId", Integer.toString(message.shuffleWriterId));
      parameters.put("expectedChecksum", Long.toString(message.checksum));
      parameters.put("calculatedChecksum", Long.toString(calculated));
      parameters.put("dataLength", Integer.toString(data.readableBytes()));
      notifier.markError(new org.apache.spark.SparkRuntimeException(
          "STREAMING_SHUFFLE_CHECKSUM_VERIFICATION_FAILED",
          scala.jdk.javaapi.CollectionConverters.asScala(parameters).toMap(scala.$less$colon$less$.MODULE$.refl()),
          null, new org.apache.spark.QueryContext[0], ""));
      message.release();
      return false;
    }
  }
}
