import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import io.netty.buffer.Unpooled;
import org.apache.spark.network.TransportContext;
import org.apache.spark.network.client.RpcResponseCallback;
import org.apache.spark.network.client.TransportClient;
import org.apache.spark.network.client.TransportClientFactory;
import org.apache.spark.network.crypto.AuthClientBootstrap;
import org.apache.spark.network.crypto.AuthServerBootstrap;
import org.apache.spark.network.sasl.SecretKeyHolder;
import org.apache.spark.network.server.OneForOneStreamManager;
import org.apache.spark.network.server.RpcHandler;
import org.apache.spark.network.server.StreamManager;
import org.apache.spark.network.server.TransportServer;
import org.apache.spark.network.util.MapConfigProvider;
import org.apache.spark.network.util.TransportConf;

/**
 * Spark's own AuthEngine on both ends of a transport connection, for interop with the Python handshake.
 *
 * <p>Requests (one JSON line each, one answer each):
 * {"op":"serve","secret":s,"app_id":a,"cipher":c,"version":v} starts a TransportServer with Spark's
 * AuthServerBootstrap whose handler echoes every one-way message back on the same channel; answers {"port":p}.
 * {"op":"served"} answers {"bodies":[hex...],"unauthenticated_closes":n}: the bodies it received after
 * authentication, and how many connections closed without authenticating.
 * {"op":"connect","port":p,"secret":..,"app_id":..,"cipher":..,"version":..,"bodies":[hex...]} connects a
 * TransportClient with Spark's AuthClientBootstrap, sends each body as a one-way message and waits for as many
 * one-way messages back; answers {"echoed":[hex...]} or, if the connection fails, the exception (class,
 * detail, and the root cause's class). With "chunks":[hex...] and "expect":n instead of "bodies", it writes each
 * chunk as raw bytes below Spark's frame encoder (so its cipher seals each chunk as one message, whatever frames
 * or pieces of frames it holds) and waits for n one-way messages back.
 */
public final class SparkAuthPeer {
  private static final long ECHO_TIMEOUT_S = 30;
  private final List<AutoCloseable> open = new ArrayList<>();
  private final List<String> served = new ArrayList<>();
  private final AtomicInteger unauthenticatedCloses = new AtomicInteger();

  public static void main(String[] args) throws Exception {
    SparkAuthPeer peer = new SparkAuthPeer();
    try {
      Wire.answerLines(peer::answer, e -> failure(e));
    } finally {
      for (AutoCloseable c : peer.open) {
        c.close();
      }
    }
    System.exit(0);
  }

  private static ObjectNode failure(Throwable e) {
    ObjectNode out = Wire.describe(e);
    Throwable root = e;
    while (root.getCause() != null && root.getCause() != root) {
      root = root.getCause();
    }
    out.put("root_cause", root.getClass().getName());
    out.put("root_detail", String.valueOf(root.getMessage()));
    return out;
  }

  static TransportConf conf(JsonNode request) {
    Map<String, String> settings = new HashMap<>();
    settings.put("spark.shuffle.io.mode", "NIO");
    settings.put("spark.shuffle.io.serverThreads", "1");
    settings.put("spark.shuffle.io.clientThreads", "1");
    settings.put("spark.network.crypto.enabled", "true");
    settings.put("spark.network.crypto.saslFallback", "false");
    settings.put("spark.network.crypto.cipher", request.get("cipher").asText());
    settings.put("spark.network.crypto.authEngineVersion", request.get("version").asText());
    return new TransportConf("shuffle", new MapConfigProvider(settings));
  }

  static SecretKeyHolder secret(JsonNode request) {
    String secret = request.get("secret").asText();
    return new SecretKeyHolder() {
      @Override
      public String getSaslUser(String appId) {
        return "sparkSaslUser";
      }

      @Override
      public String getSecretKey(String appId) {
        return secret;
      }
    };
  }

  /** Records one-way messages into {@code sink}; on a server, echoes them back. */
  static class Recorder extends RpcHandler {
    private final java.util.function.BiConsumer<TransportClient, byte[]> sink;
    private final Runnable onUnauthenticatedClose;

    Recorder(java.util.function.BiConsumer<TransportClient, byte[]> sink, Runnable onUnauthenticatedClose) {
      this.sink = sink;
      this.onUnauthenticatedClose = onUnauthenticatedClose;
    }

    @Override
    public void receive(TransportClient client, ByteBuffer message, RpcResponseCallback callback) {
      callback.onFailure(new UnsupportedOperationException("no RPCs here"));
    }

    @Override
    public void receive(TransportClient client, ByteBuffer message) {
      byte[] body = new byte[message.remaining()];
      message.get(body);
      sink.accept(client, body);
    }

    @Override
    public StreamManager getStreamManager() {
      return new OneForOneStreamManager();
    }

    @Override
    public void channelInactive(TransportClient client) {
      if (client.getClientId() == null) {
        onUnauthenticatedClose.run();
      }
    }
  }

  private ObjectNode answer(JsonNode request) throws Exception {
    switch (request.get("op").asText()) {
      case "serve": {
        Recorder echo = new Recorder((client, body) -> {
          synchronized (served) {
            served.add(Wire.hex(body));
          }
          client.send(ByteBuffer.wrap(body));
        }, unauthenticatedCloses::incrementAndGet);
        TransportConf conf = conf(request);
        TransportContext context = new TransportContext(conf, echo);
        TransportServer server = context.createServer("127.0.0.1", 0,
            List.of(new AuthServerBootstrap(conf, secret(request))));
        open.add(server);
        open.add(context);
        return Wire.object().put("port", server.getPort());
      }
      case "served": {
        ObjectNode out = Wire.object();
        ArrayNode bodies = out.putArray("bodies");
        synchronized (served) {
          served.forEach(bodies::add);
        }
        return out.put("unauthenticated_closes", unauthenticatedCloses.get());
      }
      case "connect":
        return connect(request);
      default:
        throw new IllegalArgumentException("unknown op " + request.get("op"));
    }
  }

  private ObjectNode connect(JsonNode request) throws Exception {
    LinkedBlockingQueue<byte[]> echoed = new LinkedBlockingQueue<>();
    TransportConf conf = conf(request);
    try (TransportContext context = new TransportContext(conf, new Recorder((c, body) -> echoed.add(body), () -> { }));
         TransportClientFactory factory = context.createClientFactory(
             List.of(new AuthClientBootstrap(conf, request.get("app_id").asText(), secret(request))))) {
      TransportClient client;
      try {
        client = factory.createClient("127.0.0.1", request.get("port").asInt());
      } catch (Exception e) {
        return failure(e);
      }
      int expected;
      if (request.has("chunks")) {
        for (JsonNode chunk : request.get("chunks")) {
          client.getChannel().writeAndFlush(Unpooled.wrappedBuffer(Wire.unhex(chunk.asText())));
        }
        expected = request.get("expect").asInt();
      } else {
        List<String> bodies = new ArrayList<>();
        request.get("bodies").forEach(b -> bodies.add(b.asText()));
        for (String body : bodies) {
          client.send(ByteBuffer.wrap(Wire.unhex(body)));
        }
        expected = bodies.size();
      }
      ObjectNode out = Wire.object();
      ArrayNode back = out.putArray("echoed");
      for (int i = 0; i < expected; i++) {
        byte[] body = echoed.poll(ECHO_TIMEOUT_S, TimeUnit.SECONDS);
        if (body == null) {
          break;
        }
        back.add(Wire.hex(body));
      }
      client.close();
      return out;
    }
  }
}
