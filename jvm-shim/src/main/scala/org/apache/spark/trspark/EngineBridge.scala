package org.apache.spark.trspark

import java.io.{BufferedReader, BufferedWriter, InputStreamReader, OutputStreamWriter}
import java.net.{InetAddress, ServerSocket, Socket}
import java.nio.charset.StandardCharsets
import java.security.{MessageDigest, SecureRandom}
import java.util.concurrent.{ArrayBlockingQueue, ConcurrentLinkedDeque, TimeUnit}
import java.util.concurrent.atomic.AtomicBoolean

import scala.util.control.NonFatal

import com.fasterxml.jackson.databind.{JsonNode, ObjectMapper}
import com.fasterxml.jackson.databind.node.ObjectNode

import org.apache.spark.internal.Logging

/**
 * The JVM end of the engine bridge (the Python end is `trspark/live/bridge.py`; the wire is
 * described in `docs/architecture.md`).
 *
 * Starts `<python> -m trspark.live --connect 127.0.0.1:<port>` with `TRSPARK_TOKEN` and
 * `TRSPARK_CONF` in its environment and listens on a loopback socket. Newline-delimited JSON:
 * the engine's first line is `{"type":"Hello","token":...,"version":1}`; then every event goes
 * out with an increasing `"seq"`, and the engine answers with command lines and
 * `{"type":"Ack","seq":n}` once it has processed event n.
 *
 * Any trouble -- no start, no Hello within `startTimeoutS`, wrong token, socket closed, process
 * exited, garbage, a full event queue, or the oldest unacknowledged event older than
 * `engineTimeoutS` -- calls `onFailure` exactly once with the reason; the caller then checkpoints
 * everything itself. `onAck` gets each acknowledged event's round trip (ns from sending it to its Ack).
 */
class EngineBridge(
    python: String,
    confJson: String,
    engineTimeoutS: Double,
    startTimeoutS: Double,
    queueCapacity: Int,
    onCommand: JsonNode => Unit,
    onFailure: String => Unit,
    onAck: Long => Unit) extends Logging {
  import EngineBridge._

  private val queue = new ArrayBlockingQueue[ObjectNode](queueCapacity)
  private val unacked = new ConcurrentLinkedDeque[(Long, Long)]() // (seq, nanoTime sent)
  private val failed = new AtomicBoolean(false)
  @volatile private var stopping = false
  @volatile private var process: Process = _
  @volatile private var socket: Socket = _
  /** The socket the engine connects to, while it is awaited: [[stop]] closes it to end the wait. */
  @volatile private var listening: ServerSocket = _
  private val token = {
    val bytes = new Array[Byte](16)
    new SecureRandom().nextBytes(bytes)
    bytes.map("%02x".format(_)).mkString
  }

  def isFailed: Boolean = failed.get()

  /** Launch the engine and the I/O threads; returns at once (start-up happens on a thread). */
  def start(): Unit = thread("trspark-engine-start")(connect())

  // At least 1 ms: a socket timeout of 0 would mean waiting for ever.
  private val startTimeoutMs = math.max(1, (startTimeoutS * 1000).toInt)

  // A method, not the thread's closure: its early `return`s must be local returns (inside a
  // closure Scala turns them into a NonLocalReturnControl thrown out of the thread).
  private def connect(): Unit = {
    val server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress)
    listening = server
    try {
      server.setSoTimeout(startTimeoutMs)
      val command = Seq(python, "-m", "trspark.live", "--connect", s"127.0.0.1:${server.getLocalPort}")
      val builder = new ProcessBuilder(command: _*).inheritIO()
      builder.environment().put("TRSPARK_TOKEN", token)
      builder.environment().put("TRSPARK_CONF", confJson)
      process = try builder.start() catch {
        case NonFatal(e) => fail(s"cannot start '${command.mkString(" ")}': ${e.getMessage}"); return
      }
      thread("trspark-engine-exit") {
        val code = process.waitFor()
        fail(s"engine process exited with code $code")
      }
      socket = try server.accept() catch {
        case NonFatal(_) => fail(s"engine did not connect within $startTimeoutS s (spark.trspark.engine.startTimeout)"); return
      }
    } finally server.close()
    // The application stopped while the engine was starting: its socket is closed here, not left open.
    if (stopping) { close(); return }
    socket.setSoTimeout(startTimeoutMs)
    val in = new BufferedReader(new InputStreamReader(socket.getInputStream, StandardCharsets.UTF_8))
    val hello = try Option(in.readLine()).map(Json.parse) catch { case NonFatal(_) => None }
    val ok = hello.exists { h =>
      h.path("type").asText() == "Hello" && h.path("version").asInt() == Version &&
        MessageDigest.isEqual(h.path("token").asText().getBytes(StandardCharsets.UTF_8),
          token.getBytes(StandardCharsets.UTF_8))
    }
    if (!ok) { fail("engine did not say Hello with the right token and version"); return }
    socket.setSoTimeout(0)
    logInfo(s"trspark: engine connected (pid ${process.pid()})")
    thread("trspark-engine-read")(readLoop(in))
    thread("trspark-engine-write")(writeLoop())
  }

  /** Queue an event; a full queue means the engine cannot keep up (or is still starting). */
  def send(event: ObjectNode): Unit =
    if (!failed.get() && !queue.offer(event)) {
      fail(s"event queue full ($queueCapacity events, spark.trspark.engine.queueCapacity)")
    }

  /** Called periodically: fail when the oldest unacknowledged event waited too long. */
  def checkLag(): Unit = Option(unacked.peekFirst()).foreach { case (seq, sentNs) =>
    val waited = (System.nanoTime() - sentNs) / 1e9
    if (waited > engineTimeoutS) {
      fail(f"engine has not acknowledged event $seq after $waited%.1f s (spark.trspark.engine.timeout=$engineTimeoutS)")
    }
  }

  /** End of the application: close the socket and let the engine finish on end-of-input (it writes
   *  its session summary and censors the lifetime history), SIGTERM only if it lingers. */
  def stop(): Unit = {
    stopping = true
    failed.set(true)
    Option(listening).foreach(s => try s.close() catch { case NonFatal(_) => })
    Option(socket).foreach(s => try s.close() catch { case NonFatal(_) => })
    Option(process).foreach(p => p.waitFor(StopGraceS, TimeUnit.SECONDS))
    close()
  }

  private def writeLoop(): Unit = {
    val out = new BufferedWriter(new OutputStreamWriter(socket.getOutputStream, StandardCharsets.UTF_8))
    var seq = 0L
    try {
      while (!failed.get()) {
        val event = queue.poll(200, TimeUnit.MILLISECONDS)
        if (event != null) {
          seq += 1
          event.put("seq", seq)
          unacked.addLast((seq, System.nanoTime()))
          out.write(Json.mapper.writeValueAsString(event))
          out.write('\n')
          if (queue.isEmpty) out.flush()
        }
      }
    } catch {
      case NonFatal(e) => fail(s"cannot write to the engine: $e")
    }
  }

  private def readLoop(in: BufferedReader): Unit = {
    try {
      var line = in.readLine()
      while (line != null && !failed.get()) {
        val node = try Json.parse(line) catch {
          case NonFatal(_) => fail(s"engine sent garbage: ${line.take(80)}"); return
        }
        node.path("type").asText() match {
          case "Ack" =>
            val seq = node.path("seq").asLong(-1)
            while (Option(unacked.peekFirst()).exists(_._1 <= seq)) onAck(System.nanoTime() - unacked.pollFirst()._2)
          case "" => fail(s"engine sent a message without a type: ${line.take(80)}"); return
          case _ => onCommand(node)
        }
        line = in.readLine()
      }
      fail("engine closed its socket")
    } catch {
      case NonFatal(e) => fail(s"cannot read from the engine: $e")
    }
  }

  private def fail(reason: String): Unit = {
    if (failed.compareAndSet(false, true) && !stopping) {
      onFailure(reason)
      // On SIGTERM the engine still writes its last lifetime-history records: it gets the grace it
      // gets at the application's end, waited out on a thread of its own (the caller may be the
      // listener bus).
      thread("trspark-engine-stop")(close(StopGraceS))
    }
  }

  /** Close the socket and SIGTERM the engine; kill it if it is still there `graceS` s later. */
  private def close(graceS: Long = 2L): Unit = {
    Option(socket).foreach(s => try s.close() catch { case NonFatal(_) => })
    Option(process).foreach { p =>
      p.destroy()
      if (!p.waitFor(graceS, TimeUnit.SECONDS)) p.destroyForcibly()
    }
  }

  private def thread(name: String)(body: => Unit): Unit = {
    val t = new Thread(() => try body catch { case NonFatal(e) => fail(s"$name: $e") }, name)
    t.setDaemon(true)
    t.start()
  }
}

object EngineBridge {
  val Version = 1
  /** Seconds the engine gets to end on its own at application end before it is sent SIGTERM, and
   *  after a SIGTERM on a failure before it is killed. */
  val StopGraceS = 10L
}

object Json {
  val mapper = new ObjectMapper()
  def parse(line: String): JsonNode = {
    val node = mapper.readTree(line)
    if (node == null || !node.isObject) throw new IllegalArgumentException("not a JSON object")
    node
  }
  def obj(kind: String): ObjectNode = mapper.createObjectNode().put("type", kind)
}
