import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.CompositeByteBuf;
import io.netty.buffer.Unpooled;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.apache.spark.network.shuffle.streaming.CreditControlMessage;
import org.apache.spark.network.shuffle.streaming.DataMessage;
import org.apache.spark.network.shuffle.streaming.StreamingShuffleMessage;
import org.apache.spark.network.shuffle.streaming.TerminationAckMessage;
import org.apache.spark.network.shuffle.streaming.TerminationControlMessage;

/**
 * Shared helpers of the JVM bridges: JSON lines on stdin/stdout (Jackson from Spark's jars), hex, and the
 * mapping between the project's JSON message form and Spark's StreamingShuffleMessage classes.
 * The JSON form is the codec CLI's: type (Spark enum name), seq and checksum as decimal strings.
 */
final class Wire {
  static final ObjectMapper JSON = new ObjectMapper();
  private static final PrintStream PROTOCOL_OUT = System.out;

  private Wire() {}

  /** Keeps stdout for protocol lines only: anything else (Spark's logging included) goes to stderr. */
  static void reserveStdout() {
    System.setOut(System.err);
  }

  static BufferedReader stdin() {
    return new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
  }

  static synchronized void emit(ObjectNode line) {
    try {
      PROTOCOL_OUT.println(JSON.writeValueAsString(line));
      PROTOCOL_OUT.flush();
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
  }

  /** Answers one request line. */
  interface Handler {
    ObjectNode answer(JsonNode request) throws Exception;
  }

  /**
   * The request loop of a one-answer-per-request bridge: stdout reserved, {"ready":true}, then one answer per
   * non-blank stdin line until end of input; a request that throws is answered by {@code failed}.
   */
  static void answerLines(Handler handler, java.util.function.Function<Exception, ObjectNode> failed)
      throws IOException {
    reserveStdout();
    BufferedReader in = stdin();
    emit(object().put("ready", true));
    for (String line = in.readLine(); line != null; line = in.readLine()) {
      if (line.isBlank()) {
        continue;
      }
      ObjectNode answer;
      try {
        answer = handler.answer(JSON.readTree(line));
      } catch (Exception e) {
        answer = failed.apply(e);
      }
      emit(answer);
    }
  }

  static ObjectNode object() {
    return JSON.createObjectNode();
  }

  static String hex(byte[] bytes) {
    StringBuilder out = new StringBuilder(bytes.length * 2);
    for (byte b : bytes) {
      out.append(Character.forDigit((b >> 4) & 0xf, 16)).append(Character.forDigit(b & 0xf, 16));
    }
    return out.toString();
  }

  static byte[] unhex(String text) {
    if (text.length() % 2 != 0) {
      throw new IllegalArgumentException("odd-length hex");
    }
    byte[] out = new byte[text.length() / 2];
    for (int i = 0; i < out.length; i++) {
      out[i] = (byte) Integer.parseInt(text.substring(2 * i, 2 * i + 2), 16);
    }
    return out;
  }

  static byte[] bytes(ByteBuf buf) {
    byte[] out = new byte[buf.readableBytes()];
    buf.getBytes(buf.readerIndex(), out);
    return out;
  }

  /** Exception as JSON: its class and message, and Spark's condition when it carries one. */
  static ObjectNode describe(Throwable t) {
    ObjectNode out = object();
    out.put("exception", t.getClass().getName());
    out.put("detail", String.valueOf(t.getMessage()));
    if (t instanceof org.apache.spark.SparkThrowable) {
      org.apache.spark.SparkThrowable st = (org.apache.spark.SparkThrowable) t;
      if (st.getCondition() != null) {
        out.put("condition", st.getCondition());
        ObjectNode parameters = out.putObject("parameters");
        st.getMessageParameters().forEach(parameters::put);
      }
    }
    return out;
  }

  /** Builds a Spark message from the JSON form (payload hex; data_size is implied by the payload). */
  static StreamingShuffleMessage toSpark(JsonNode m) {
    String type = m.get("type").asText();
    int writer = m.get("writer_id").asInt();
    int reader = m.get("reader_id").asInt();
    StreamingShuffleMessage message;
    switch (type) {
      case "DATA_MESSAGE_UNSAFE_ROW": {
        byte[] payload = unhex(m.get("payload").asText());
        long checksum = Long.parseLong(m.get("checksum").asText());
        message = new DataMessage(writer, reader, payload.length, Unpooled.wrappedBuffer(payload), checksum);
        break;
      }
      case "CREDIT_CONTROL_MESSAGE":
        message = new CreditControlMessage(writer, reader, m.get("num_messages").asInt());
        break;
      case "TERMINATION_CONTROL_MESSAGE":
        message = new TerminationControlMessage(writer, reader);
        break;
      case "TERMINATION_ACK_MESSAGE":
        message = new TerminationAckMessage(writer, reader);
        break;
      default:
        throw new IllegalArgumentException("no such message type name: " + type);
    }
    message.setSeqNum(Long.parseLong(m.get("seq").asText()));
    return message;
  }

  /** Encodes a message body exactly as Spark's senders do: a composite buffer sized to headerLength(). */
  static ByteBuf encodeBody(StreamingShuffleMessage message) {
    CompositeByteBuf buf = Unpooled.compositeBuffer().capacity(message.headerLength());
    message.encode(buf);
    return buf;
  }

  static ObjectNode fromSpark(StreamingShuffleMessage message) {
    ObjectNode out = object();
    out.put("type", message.messageType().name());
    out.put("seq", Long.toString(message.getSeqNum()));
    if (message instanceof DataMessage) {
      DataMessage d = (DataMessage) message;
      out.put("writer_id", d.shuffleWriterId);
      out.put("reader_id", d.shuffleReaderId);
      out.put("data_size", d.dataSize);
      out.put("checksum", Long.toString(d.checksum));
      out.put("payload", hex(bytes(d.getRecordData())));
    } else if (message instanceof CreditControlMessage) {
      CreditControlMessage c = (CreditControlMessage) message;
      out.put("writer_id", c.shuffleWriterId);
      out.put("reader_id", c.shuffleReaderId);
      out.put("num_messages", c.numMessages);
    } else if (message instanceof TerminationControlMessage) {
      TerminationControlMessage c = (TerminationControlMessage) message;
      out.put("writer_id", c.shuffleWriterId);
      out.put("reader_id", c.shuffleReaderId);
    } else {
      TerminationAckMessage a = (TerminationAckMessage) message;
      out.put("writer_id", a.shuffleWriterId);
      out.put("reader_id", a.shuffleReaderId);
    }
    return out;
  }
}
