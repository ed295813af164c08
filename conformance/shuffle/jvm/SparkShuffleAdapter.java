import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
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
import org.apache.spark.network.crypto.AuthClientBootstrap;
import org.apache.spark.network.crypto.AuthServerBootstrap;
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
 * <p>One process serves many peers, each a Spark writer or reader side with its own handler, ErrorNotifier,
 * TransportContext, server or client factory (so its own event loops and connections), named by an id the
 * driver chooses. Every command and every event carries that {@code peer} id, so peers running at the same
 * time never mix; a closed peer reports nothing more. Start-up (JVM, Spark's classes) is paid once per run.
 *
 * <p>{"op":"writer","peer":p,"writer_id","num_readers","shuffle_id","connection_timeout_ms","checksum"}: Spark
 * as the writer side. A {@link StreamingShuffleServerHandler} served by a {@link TransportServer} on
 * 127.0.0.1, port 0. The handler's bind futures, the ack callback and the ErrorNotifier are Spark's;
 * StreamingShuffleWriter itself needs a SparkEnv, a ShuffleHandle and a live task, so its send path
 * (ShardState.send: seq numbering, the pre-bind queue chained on the bind future, the connection timeout) and
 * its ack check (onTerminationAckReceived) are transcribed here from its bytecode, raising Spark's own
 * exceptions. Then {"op":"data","peer":p,"reader_id":r,"payload":hex} (checksum by ShuffleChecksum when
 * checksum, else 0) and {"op":"terminate","peer":p,"reader_id":r}. Events: ready(port), bound, written, ack,
 * all_acks, error.
 *
 * <p>Either command may carry {"auth":{"secret","app_id","cipher","version"}}: the writer's server then installs
 * Spark's {@link AuthServerBootstrap}, the reader's client factory {@link AuthClientBootstrap} (the bootstraps
 * Spark 4.3.0's streaming shuffle leaves out), so every connection runs the AuthEngine handshake and is encrypted.
 *
 * <p>{"op":"reader","peer":p,"host","port","writer_id","reader_id","shuffle_id","quota","checksum","manual"}:
 * Spark as the reader side. A {@link StreamingShuffleClientHandler} on a client from
 * {@link TransportClientFactory} (connected on its own thread); a consumer thread takes from its queue as
 * StreamingShuffleReader does (checksum verification transcribed, using Spark's ShuffleChecksum and
 * condition) and releases each DATA (returning quota) unless manual, in which case
 * {"op":"consume","peer":p,"count":n} releases the oldest n. Events: ready, connected, connect_failed, data,
 * termination, ack_written, closed, error.
 *
 * <p>{"op":"close","peer":p} shuts a peer's server or client, event loops and threads down and answers
 * {"event":"stopped","peer":p} as its last event. {"op":"status","peer":t} answers
 * {"event":"status","peer":t,"peers":[ids of the open peers]}. {"op":"settings","peer":t,"settings":{key: value}}
 * answers {"event":"settings","peer":t} with, if Spark refuses one, "refused" (the key), exception, detail
 * and condition, as Spark's ConfigEntry objects read them.
 * A rejected command answers command_failed. End of stdin closes every peer and exits.
 */
public final class SparkShuffleAdapter {
  private final Map<Integer, Peer> peers = new HashMap<>();

  private SparkShuffleAdapter() {}

  public static void main(String[] args) throws Exception {
    Wire.reserveStdout();
    new SparkShuffleAdapter().serve();
    System.exit(0);
  }

  private void serve() throws Exception {
    BufferedReader in = Wire.stdin();
    Wire.emit(Wire.object().put("ready", true));
    try {
      for (String line = in.readLine(); line != null; line = in.readLine()) {
        if (!line.isBlank()) {
          command(Wire.JSON.readTree(line));
        }
      }
    } finally {
      for (Peer peer : peers.values()) {
        peer.close();
      }
    }
  }

  /**
   * Spark's own reading of the streaming-shuffle settings: each of the six ConfigEntry objects of
   * {@code org.apache.spark.internal.config.package$} read from a SparkConf holding the given keys, as
   * StreamingShuffleWriter and StreamingShuffleReader read them; the first refusal is the answer.
   */
  private static ObjectNode settings(int peerId, JsonNode values) {
    org.apache.spark.SparkConf conf = new org.apache.spark.SparkConf(false);
    values.fields().forEachRemaining(entry -> conf.set(entry.getKey(), entry.getValue().asText()));
    org.apache.spark.internal.config.package$ config = org.apache.spark.internal.config.package$.MODULE$;
    List<org.apache.spark.internal.config.ConfigEntry<Object>> entries = List.of(
        config.STREAMING_SHUFFLE_CHECKSUM_ENABLED(), config.STREAMING_SHUFFLE_NETWORK_BUFFER_SIZE(),
        config.STREAMING_SHUFFLE_NETWORK_BUFFER_MAX_WAIT_TIME_MS(), config.STREAMING_SHUFFLE_WRITER_MAX_MEMORY(),
        config.STREAMING_SHUFFLE_READER_MAX_MEMORY(), config.STREAMING_SHUFFLE_WRITER_CONNECTION_TIMEOUT_MS());
    ObjectNode answer = event("settings").put("peer", peerId);
    for (org.apache.spark.internal.config.ConfigEntry<Object> entry : entries) {
      try {
        conf.get(entry);
      } catch (RuntimeException refused) {
        answer.put("refused", entry.key());
        answer.setAll(Wire.describe(refused));
        return answer;
      }
    }
    return answer;
  }

  private void command(JsonNode request) {
    JsonNode id = request.get("peer");
    try {
      String op = request.get("op").asText();
      int peerId = id.asInt();
      if (op.equals("status")) {
        ObjectNode status = event("status").put("peer", peerId);
        ArrayNode open = status.putArray("peers");
        peers.keySet().forEach(open::add);
        Wire.emit(status);
      } else if (op.equals("settings")) {
        Wire.emit(settings(peerId, request.get("settings")));
      } else if (op.equals("writer") || op.equals("reader")) {
        if (peers.containsKey(peerId)) {
          throw new IllegalArgumentException("peer " + peerId + " is already open");
        }
        System.err.println("[adapter] peer " + peerId + ": " + request);
        peers.put(peerId, op.equals("writer") ? new WriterSide(peerId, request) : new ReaderSide(peerId, request));
      } else if (op.equals("close")) {
        Peer peer = peers.remove(peerId);
        if (peer != null) {
          peer.close();
        }
        Wire.emit(event("stopped").put("peer", peerId));
        System.err.println("[adapter] peer " + peerId + " stopped");
      } else {
        Peer peer = peers.get(peerId);
        if (peer == null) {
          throw new IllegalArgumentException("no open peer " + peerId);
        }
        peer.command(op, request);
      }
    } catch (Exception e) {
      ObjectNode line = event("command_failed");
      if (id != null) {
        line.put("peer", id.asInt());
      }
      line.setAll(Wire.describe(e));
      Wire.emit(line);
    }
  }

  /** Spark's transport settings; with {@code auth} (secret, app_id, cipher, version) its AuthEngine is on. */
  static TransportConf transportConf(JsonNode auth) {
    Map<String, String> settings = new HashMap<>();
    settings.put("spark.shuffle.io.mode", "NIO");
    settings.put("spark.shuffle.io.serverThreads", "2");
    settings.put("spark.shuffle.io.clientThreads", "2");
    if (auth != null) {
      settings.put("spark.network.crypto.enabled", "true");
      settings.put("spark.network.crypto.saslFallback", "false");
      settings.put("spark.network.crypto.cipher", auth.get("cipher").asText());
      settings.put("spark.network.crypto.authEngineVersion", auth.get("version").asText());
    }
    return new TransportConf("shuffle", new MapConfigProvider(settings));
  }

  static ObjectNode event(String name) {
    return Wire.object().put("event", name);
  }

  /** One writer or reader side; its events carry its id and stop once it is closed. */
  abstract static class Peer {
    final int id;
    final ErrorNotifier notifier = new ReportingNotifier(this);
    private final Object emitting = new Object();
    private boolean closed;

    Peer(int id) {
      this.id = id;
    }

    final void emit(ObjectNode line) {
      synchronized (emitting) {
        if (!closed) {
          Wire.emit(line.put("peer", id));
        }
      }
    }

    abstract void command(String op, JsonNode request);

    /** Stops reporting, then releases everything the peer holds; returns when its sockets are closed. */
    final void close() {
      synchronized (emitting) {
        closed = true;
      }
      shutdown();
    }

    abstract void shutdown();
  }

  /** Spark's ErrorNotifier, reporting every error it is given. */
  static final class ReportingNotifier extends ErrorNotifier {
    private final Peer peer;

    ReportingNotifier(Peer peer) {
      this.peer = peer;
    }

    @Override
    public void markError(Throwable error) {
      Throwable cause = error;
      while (cause instanceof java.util.concurrent.CompletionException && cause.getCause() != null) {
        cause = cause.getCause();
      }
      ObjectNode line = event("error");
      line.setAll(Wire.describe(cause));
      peer.emit(line);
      super.markError(error);
    }
  }

  static final class WriterSide extends Peer {
    private final int writerId;
    private final int numReaders;
    private final int shuffleId;
    private final long connectionTimeoutMs;
    private final boolean checksumEnabled;
    private final AtomicLong[] lastSent;
    private final AtomicBoolean[] ackReceived;
    private final Object[] clients;
    private final StreamingShuffleServerHandler handler;
    private final TransportContext context;
    private final TransportServer server;
    private int acks;

    WriterSide(int id, JsonNode request) {
      super(id);
      this.writerId = request.get("writer_id").asInt();
      this.numReaders = request.get("num_readers").asInt();
      this.shuffleId = request.get("shuffle_id").asInt();
      this.connectionTimeoutMs = request.get("connection_timeout_ms").asLong();
      this.checksumEnabled = request.get("checksum").asBoolean();
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
      for (int r = 0; r < numReaders; r++) {
        lastSent[r] = new AtomicLong(-1);
        ackReceived[r] = new AtomicBoolean(false);
        clients[r] = bindFuture(r);
      }
      JsonNode auth = request.get("auth");
      TransportConf conf = transportConf(auth);
      this.context = new TransportContext(conf, handler);
      this.server = context.createServer("127.0.0.1", 0, auth == null ? List.of()
          : List.of(new AuthServerBootstrap(conf, SparkAuthPeer.secret(auth))));
      emit(event("ready").put("role", "writer").put("port", server.getPort()));
    }

    /** StreamingShuffleWriter.onTerminationAckReceived, transcribed: check the seq first, count once. */
    private void onTerminationAckReceived(int readerId, long seq) {
      long expected = lastSent[readerId].get();
      if (expected != seq) {
        throw StreamingShuffleManager$.MODULE$.streamingShuffleIncorrectSequenceNumber(
            StreamingShuffleMessageType.TERMINATION_ACK_MESSAGE, writerId, readerId, expected, seq);
      }
      boolean counted = ackReceived[readerId].compareAndSet(false, true);
      emit(event("ack").put("reader_id", readerId).put("seq", Long.toString(seq)).put("counted", counted));
      if (counted) {
        synchronized (this) {
          acks += 1;
          if (acks == numReaders) {
            emit(event("all_acks"));
          }
        }
      }
    }

    /** ShardState's constructor, transcribed: the bind future, with Spark's timeout when one is set. */
    private CompletableFuture<TransportClient> bindFuture(int readerId) {
      CompletableFuture<TransportClient> bound = handler.futureClients()[readerId];
      bound.thenAccept(client -> emit(event("bound").put("reader_id", readerId)
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
        emit(event("written").put("reader_id", readerId).put("seq", Long.toString(seq)).put("type", type)
            .put("ok", future.isSuccess()));
      });
    }

    @Override
    void command(String op, JsonNode request) {
      int readerId = request.get("reader_id").asInt();
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
        throw new IllegalArgumentException("unknown writer op " + op);
      }
    }

    /** Cancels pending binds (their timers and queued sends go), closes the server and its connections. */
    @Override
    void shutdown() {
      for (CompletableFuture<TransportClient> bound : handler.futureClients()) {
        bound.cancel(false);
      }
      server.close();
      context.close();
    }
  }

  static final class ReaderSide extends Peer {
    private final String host;
    private final int port;
    private final int writerId;
    private final boolean checksumEnabled;
    private final boolean manual;
    private final LinkedBlockingQueue<StreamingShuffleMessage> queue = new LinkedBlockingQueue<>();
    private final ArrayDeque<DataMessage> held = new ArrayDeque<>();
    private final TransportContext context;
    private final TransportClientFactory factory;
    private final Thread consumer;
    private final Thread connector;
    private volatile TransportClient client;
    private final boolean authenticated;
    private volatile boolean bootstrapped;
    private final StreamingShuffleClientHandler handler;

    ReaderSide(int id, JsonNode request) {
      super(id);
      this.host = request.get("host").asText();
      this.port = request.get("port").asInt();
      this.writerId = request.get("writer_id").asInt();
      this.checksumEnabled = request.get("checksum").asBoolean();
      this.manual = request.get("manual").asBoolean();
      this.authenticated = request.has("auth");
      this.handler = new StreamingShuffleClientHandler(writerId,
          request.get("reader_id").asInt(), queue, request.get("shuffle_id").asInt(), request.get("quota").asLong(),
          null, notifier) {
        /**
         * Spark's handler sends its first CREDIT here, when the channel becomes active, which is before a
         * client bootstrap runs: with AuthClientBootstrap that CREDIT would go out in clear ahead of the
         * handshake. With auth it is deferred until createClient returned (the bootstrap done), see connect().
         */
        @Override
        public void channelActive(TransportClient client) {
          if (!authenticated || bootstrapped) {
            super.channelActive(client);
          }
        }

        @Override
        public void channelInactive(TransportClient client) {
          super.channelInactive(client);
          emit(event("closed").put("writer_id", writerId));
        }
      };
      handler.setOnTermAckResponseHandler(new AbstractFunction1<Object, BoxedUnit>() {
        @Override
        public BoxedUnit apply(Object writer) {
          emit(event("ack_written").put("writer_id", (Integer) writer));
          return BoxedUnit.UNIT;
        }
      });
      JsonNode auth = request.get("auth");
      TransportConf conf = transportConf(auth);
      this.context = new TransportContext(conf, handler);
      this.factory = context.createClientFactory(auth == null ? List.of()
          : List.of(new AuthClientBootstrap(conf, auth.get("app_id").asText(), SparkAuthPeer.secret(auth))));
      this.consumer = new Thread(this::consume, "streaming-shuffle-consumer-" + id);
      this.consumer.setDaemon(true);
      this.connector = new Thread(this::connect, "streaming-shuffle-connect-" + id);
      this.connector.setDaemon(true);
      consumer.start();
      emit(event("ready").put("role", "reader"));
      connector.start();
    }

    private void connect() {
      try {
        client = factory.createClient(host, port);
        if (authenticated) {
          bootstrapped = true;
          handler.channelActive(client);
        }
        emit(event("connected").put("local", String.valueOf(client.getChannel().localAddress())));
      } catch (Exception e) {
        ObjectNode line = event("connect_failed");
        line.setAll(Wire.describe(e));
        emit(line);
      }
    }

    @Override
    void command(String op, JsonNode request) {
      if (!op.equals("consume")) {
        throw new IllegalArgumentException("unknown reader op " + op);
      }
      release(request.get("count").asInt());
    }

    private synchronized void release(int count) {
      for (int i = 0; i < count && !held.isEmpty(); i++) {
        held.pollFirst().release();
      }
    }

    /** Stops the consumer, closes the connection (a connect still under way fails with the factory). */
    @Override
    void shutdown() {
      consumer.interrupt();
      factory.close();
      try {
        connector.join(10_000);
        consumer.join(10_000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      if (client != null) {
        client.close();
      }
      context.close();
      release(Integer.MAX_VALUE);
      for (StreamingShuffleMessage message = queue.poll(); message != null; message = queue.poll()) {
        message.release();
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
            emit(event("data").put("writer_id", data.shuffleWriterId).put("seq", Long.toString(data.getSeqNum()))
                .put("checksum", Long.toString(data.checksum)).put("payload", Wire.hex(Wire.bytes(payload))));
            synchronized (this) {
              held.addLast(data);
            }
            if (!manual) {
              release(1);
            }
          } else {
            emit(event("termination").put("writer_id", StreamingShuffleManager$.MODULE$.getWriterId(message))
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
