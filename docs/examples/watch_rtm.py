"""The docs/conformance.md recipe, run from outside the repository: a real-time-mode query of 7 batches in
one session, watched live with `streamwire monitor --pid`."""
import os, signal, subprocess, sys, tempfile, time
from pyspark.sql import DataFrame, SparkSession

HOST = "127.93.0.1"  # the session's own loopback address: the saved capture holds only its traffic
out = sys.argv[1]
spark = (SparkSession.builder.master("local[8]").config("spark.ui.enabled", "false")
         .config("spark.driver.host", HOST).config("spark.driver.bindAddress", HOST)
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
jvm_pid = int(spark._jvm.java.lang.ProcessHandle.current().pid())
monitor = subprocess.Popen([sys.executable, "-m", "streamwire", "monitor", "-i", "lo", "--pid", str(jvm_pid),
                            "--filter", f"host {HOST}", "--write-pcap", f"{out}/rtm.pcap",
                            "--json-report", f"{out}/report.json", "--html", f"{out}/report.html"],
                           stderr=subprocess.PIPE, text=True)
print(monitor.stderr.readline().strip(), flush=True)
jvm = spark._jvm
source = jvm.org.apache.spark.sql.execution.streaming.sources.LowLatencyMemoryStream.apply(
    spark._jsparkSession, 2, jvm.org.apache.spark.sql.Encoders.STRING())
df = DataFrame(source.toDF(), spark).repartition(2, "value")
arrivals = f"{out}/arrivals.txt"


def arrived(row):  # a Python foreach sink (on the allowlist): one line per delivered row
    with open(arrivals, "a") as f:
        f.write(row.value + "\n")


query = (df.writeStream.foreach(arrived).outputMode("update")
         .trigger(realTime="5 seconds").option("checkpointLocation", tempfile.mkdtemp()).start())
conv = jvm.scala.jdk.javaapi.CollectionConverters
rows = 0
for batch in range(7):
    source.addData(conv.asScala([f"row {batch}-{i}" for i in range(40)]).toSeq())
    rows += 40
    time.sleep(6)
time.sleep(6)
delivered = len(open(arrivals).read().splitlines())
query.stop()
time.sleep(1)
monitor.send_signal(signal.SIGINT)
code = monitor.wait(120)
print("offered", rows, "delivered", delivered, "monitor exit", code, flush=True)
print(monitor.stderr.read(), flush=True)
spark.stop()
