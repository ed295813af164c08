import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.embedded.EmbeddedChannel;
import io.netty.handler.codec.DecoderException;
import java.io.ByteArrayOutputStream;
import java.lang.reflect.Field;
import java.nio.ByteBuffer;
import java.nio.channels.Channels;
import java.nio.channels.WritableByteChannel;
import org.apache.spark.network.buffer.NettyManagedBuffer;
import org.apache.spark.network.protocol.Message;
import org.apache.spark.network.protocol.MessageDecoder;
import org.apache.spark.network.protocol.MessageEncoder;
import org.apache.spark.network.protocol.MessageWithHeader;
import org.apache.spark.network.protocol.OneWayMessage;
import org.apache.spark.network.shuffle.streaming.DataMessage;
import org.apache.spark.network.shuffle.streaming.StreamingShuffleMessage;
import org.apache.spark.network.util.TransportFrameDecoder;

/**
 * Encodes and decodes streaming-shuffle messages with Spark 4.3.0's own classes, one JSON request per stdin
 * line, one JSON answer per stdout line, so the Python codec can be checked against Spark byte for byte.
 *
 * Requests: {"op":"encode","message":{...}} -> {"ok":true,"body":hex,"frame":hex}
 *           {"op":"decode_body","hex":...}   -> {"ok":true,"message":{...},"unread":n} | {"ok":false,...}
 *           {"op":"decode_frame","hex":...}  -> {"ok":true,"message":{...},"transport_type":T,"pending":n}
 *                                               | {"ok":false,"stage":"frame"|"transport"|"body",...}
 * "unread" is the number of body bytes Spark's decoder left unread (it never checks them for non-DATA types);
 * "pending" is the number of bytes the frame decoder still holds after the frames it emitted, and
 * "extra_messages" the number of messages it decoded after the first.
 */
public final class SparkCodecBridge {
  private SparkCodecBridge() {}

  public static void main(String[] args) throws Exception {
    Wire.answerLines(SparkCodecBridge::handle, e -> Wire.describe(e).put("ok", false).put("stage", "request"));
  }

  private static ObjectNode handle(JsonNode request) throws Exception {
    String op = request.get("op").asText();
    switch (op) {
      case "encode":
        return encode(request.get("message"));
      case "decode_body":
        return decodeBody(Unpooled.wrappedBuffer(Wire.unhex(request.get("hex").asText())));
      case "decode_frame":
        return decodeFrame(Wire.unhex(request.get("hex").asText()));
      default:
        throw new IllegalArgumentException("unknown op " + op);
    }
  }

  private static ObjectNode encode(JsonNode json) throws Exception {
    StreamingShuffleMessage message = Wire.toSpark(json);
    ByteBuf body = Wire.encodeBody(message);
    byte[] bodyBytes = Wire.bytes(body);
    byte[] frame = frame(new OneWayMessage(new NettyManagedBuffer(body)));
    return Wire.object().put("ok", true).put("body", Wire.hex(bodyBytes)).put("frame", Wire.hex(frame));
  }

  /** Runs Spark's transport MessageEncoder and drains the MessageWithHeader it produces. */
  private static byte[] frame(Message message) throws Exception {
    EmbeddedChannel channel = new EmbeddedChannel(MessageEncoder.INSTANCE);
    try {
      channel.writeOutbound(message);
      Object encoded = channel.readOutbound();
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      if (encoded instanceof MessageWithHeader) {
        MessageWithHeader region = (MessageWithHeader) encoded;
        WritableByteChannel sink = Channels.newChannel(out);
        while (region.transferred() < region.count()) {
          region.transferTo(sink, region.transferred());
        }
        region.release();
      } else {
        ByteBuf buf = (ByteBuf) encoded;
        out.write(Wire.bytes(buf));
        buf.release();
      }
      return out.toByteArray();
    } finally {
      channel.finishAndReleaseAll();
    }
  }

  private static ObjectNode decodeBody(ByteBuf body) {
    try {
      StreamingShuffleMessage message = StreamingShuffleMessage.decode(body);
      int unread = body.readableBytes();
      if (message instanceof DataMessage) {
        unread -= ((DataMessage) message).dataSize;
      }
      return Wire.object().put("ok", true).<ObjectNode>set("message", Wire.fromSpark(message))
          .put("unread", unread);
    } catch (Exception e) {
      return Wire.describe(e).put("ok", false).put("stage", "body");
    }
  }

  /** Spark's inbound pipeline: TransportFrameDecoder then MessageDecoder, then the shuffle body decoder. */
  private static ObjectNode decodeFrame(byte[] bytes) throws Exception {
    TransportFrameDecoder frames = new TransportFrameDecoder();
    EmbeddedChannel channel = new EmbeddedChannel(frames, MessageDecoder.INSTANCE);
    try {
      try {
        channel.writeInbound(Unpooled.wrappedBuffer(bytes));
      } catch (Exception e) {
        // MessageToMessageDecoder wraps what Spark's MessageDecoder throws in a DecoderException.
        Throwable cause = e instanceof DecoderException && e.getCause() != null ? e.getCause() : e;
        String stage = isTransportDecoder(cause) ? "transport" : "frame";
        return Wire.describe(cause).put("ok", false).put("stage", stage);
      }
      Object decoded = channel.readInbound();
      long pending = pendingBytes(frames);
      int extra = 0;
      for (Object more = channel.readInbound(); more != null; more = channel.readInbound()) {
        releaseBody((Message) more);
        extra += 1;
      }
      if (decoded == null) {
        return Wire.object().put("ok", false).put("stage", "frame").put("exception", "")
            .put("detail", "incomplete frame: no message decoded").put("pending", pending);
      }
      Message message = (Message) decoded;
      String transportType = message.type().name();
      if (!(message instanceof OneWayMessage)) {
        releaseBody(message);
        return Wire.object().put("ok", false).put("stage", "transport").put("exception", "")
            .put("detail", "not a OneWayMessage: " + transportType).put("transport_type", transportType)
            .put("pending", pending);
      }
      ByteBuffer body = message.body().nioByteBuffer();
      ObjectNode answer = decodeBody(Unpooled.wrappedBuffer(body));
      message.body().release();
      return answer.put("transport_type", transportType).put("pending", pending).put("extra_messages", extra);
    } finally {
      channel.finishAndReleaseAll();
    }
  }

  private static void releaseBody(Message message) {
    if (message.body() != null) {
      message.body().release();
    }
  }

  private static boolean isTransportDecoder(Throwable e) {
    for (StackTraceElement frame : e.getStackTrace()) {
      if (frame.getClassName().startsWith("org.apache.spark.network.protocol.")) {
        return true;
      }
      if (frame.getClassName().equals(TransportFrameDecoder.class.getName())) {
        return false;
      }
    }
    return false;
  }

  /** Bytes the frame decoder buffers after the frames it emitted (read through its private fields). */
  private static long pendingBytes(TransportFrameDecoder decoder) throws Exception {
    Field total = TransportFrameDecoder.class.getDeclaredField("totalSize");
    total.setAccessible(true);
    Field next = TransportFrameDecoder.class.getDeclaredField("nextFrameSize");
    next.setAccessible(true);
    long nextFrame = next.getLong(decoder);
    return total.getLong(decoder) + (nextFrame == -1 ? 0 : 8);
  }
}
