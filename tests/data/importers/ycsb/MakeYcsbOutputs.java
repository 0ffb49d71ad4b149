// Writes the YCSB test files of this folder: a simulated run (seeded, so every op's
// latency is known) put through the same calls YCSB's measurement classes make
// (site.ycsb.measurements.OneMeasurementHdrHistogram, OneMeasurementRaw and
// exporter.TextMeasurementsExporter, YCSB master), with HdrHistogram's own Java classes.
// Run: java -cp /usr/share/java/hdrhistogram.jar MakeYcsbOutputs.java OUTDIR
// (Debian: libhdrhistogram-java). Also writes known.csv: every simulated op.
import java.io.*;
import java.util.*;
import org.HdrHistogram.*;

public class MakeYcsbOutputs {
  static final long T0 = 1700000000000L;  // ms since the epoch: the run's start

  public static void main(String[] args) throws IOException {
    File dir = new File(args[0]);
    Random rnd = new Random(17);
    String[] names = {"READ", "UPDATE"};
    int[] counts = {1000, 500};
    List<long[]> known = new ArrayList<>();  // op index, end ms, latency us, status
    long now = T0;
    int[] done = new int[2];
    while (done[0] < counts[0] || done[1] < counts[1]) {
      int op = (done[0] < counts[0] && (done[1] >= counts[1] || rnd.nextInt(3) > 0)) ? 0 : 1;
      int lat = (int) Math.round(Math.exp(5.5 + 0.6 * rnd.nextGaussian())) + (op == 1 ? 80 : 0);
      if (rnd.nextInt(1000) == 0) lat *= 40;  // a rare slow op: a real tail
      now += 1 + rnd.nextInt(2);
      int status = (op == 0 && rnd.nextInt(80) == 0) ? 1 : 0;  // 1: NOT_FOUND
      known.add(new long[] {op, now, lat, status});
      done[op]++;
    }
    long runtimeMs = now - T0 + 3;
    try (PrintWriter k = new PrintWriter(new File(dir, "known.csv"))) {
      k.println("op,end_ms,latency_us,status");
      for (long[] r : known) {
        k.println(names[(int) r[0]] + "," + r[1] + "," + r[2] + "," + (r[3] == 1 ? "NOT_FOUND" : "OK"));
      }
    }
    // --- measurementtype=hdrhistogram with hdrhistogram.fileoutput=true: <OP>.hdr logs
    Histogram[] total = new Histogram[2];
    for (int op = 0; op < 2; op++) {
      Recorder recorder = new Recorder(3);
      PrintStream log = new PrintStream(new FileOutputStream(new File(dir, names[op] + ".hdr")), false);
      HistogramLogWriter w = new HistogramLogWriter(log);
      w.outputComment("[Logging for: " + names[op] + "]");
      w.outputLogFormatVersion();
      w.outputStartTime(T0);
      w.setBaseTime(T0);
      w.outputLegend();
      // The status thread takes an interval every second (-s); simulated time, so the
      // interval's times are given (YCSB's come from the Recorder's clock).
      long nextStatus = T0 + 1000;
      for (long[] r : known) {
        if (r[1] >= nextStatus) {
          Histogram h = recorder.getIntervalHistogram();
          if (total[op] == null) total[op] = h.copy(); else total[op].add(h);
          w.outputIntervalHistogram((nextStatus - 1000 - T0) / 1000.0, (nextStatus - T0) / 1000.0,
              h, 1000000.0);
          nextStatus += 1000;
        }
        if (r[0] == op) recorder.recordValue(r[2]);
      }
      Histogram h = recorder.getIntervalHistogram();
      if (total[op] == null) total[op] = h.copy(); else total[op].add(h);
      w.outputIntervalHistogram((nextStatus - 1000 - T0) / 1000.0, (T0 + runtimeMs - T0) / 1000.0,
          h, 1000000.0);
      log.close();
    }
    // --- the text exporter's output of the same run (hdrhistogram percentiles 50,95,99)
    try (PrintWriter t = new PrintWriter(new File(dir, "ycsb-hdrhistogram-text.txt"))) {
      t.println("Command line: -db site.ycsb.BasicDB -P workloads/workloada -threads 4 -s -t");
      t.println("YCSB Client 0.18.0-SNAPSHOT");
      t.println();
      t.println("Loading workload...");
      t.println("Starting test.");
      t.println("2023-11-14 22:13:21:000 1 sec: 600 operations; 600 current ops/sec; [READ: Count=400]");
      t.println("[OVERALL], RunTime(ms), " + runtimeMs);
      t.println("[OVERALL], Throughput(ops/sec), " + (1500 * 1000.0 / runtimeMs));
      t.println("[TOTAL_GCS_G1_Young_Generation], Count, 1");
      t.println("[TOTAL_GC_TIME_G1_Young_Generation], Time(ms), 4");
      t.println("[CLEANUP], Operations, 4");
      t.println("[CLEANUP], AverageLatency(us), 2.25");
      for (int op = 0; op < 2; op++) {
        Histogram h = total[op];
        String m = "[" + names[op] + "], ";
        t.println(m + "Operations, " + h.getTotalCount());
        t.println(m + "AverageLatency(us), " + h.getMean());
        t.println(m + "MinLatency(us), " + h.getMinValue());
        t.println(m + "MaxLatency(us), " + h.getMaxValue());
        for (int p : new int[] {50, 95, 99}) {
          t.println(m + p + "thPercentileLatency(us), " + h.getValueAtPercentile(p));
        }
        t.println(m + "99.9PercentileLatency(us), " + h.getValueAtPercentile(99.9));
        long nf = 0;
        for (long[] r : known) if (r[0] == op && r[3] == 1) nf++;
        t.println(m + "Return=OK, " + (h.getTotalCount() - nf));
        if (nf > 0) t.println(m + "Return=NOT_FOUND, " + nf);
      }
    }
    // --- measurementtype=raw: the raw lines, then the exporter's summary
    try (PrintWriter t = new PrintWriter(new File(dir, "ycsb-raw.txt"))) {
      t.println("Raw data measurement: will output to stdout.");
      t.println("[OVERALL], RunTime(ms), " + runtimeMs);
      t.println("[OVERALL], Throughput(ops/sec), " + (1500 * 1000.0 / runtimeMs));
      for (int op = 0; op < 2; op++) {
        List<Integer> lat = new ArrayList<>();
        long sum = 0, nf = 0;
        t.println(names[op] + " latency raw data: op, timestamp(ms), latency(us)");
        for (long[] r : known) {
          if (r[0] != op) continue;
          t.println(String.format("%s,%d,%d", names[op], r[1], r[2]));
          lat.add((int) r[2]);
          sum += r[2];
          if (r[3] == 1) nf++;
        }
        int n = lat.size();
        Collections.sort(lat);
        String m = "[" + names[op] + "], ";
        t.println(m + "Total Operations, " + n);
        t.println(m + "Below is a summary of latency in microseconds:, " + -1);
        t.println(m + "Average, " + ((double) sum / (double) n));
        t.println(m + "Min, " + lat.get(0));
        t.println(m + "Max, " + lat.get(n - 1));
        double[] qs = {0.01, 0.05, 0.5, 0.9, 0.95, 0.99, 0.999, 0.9999};
        String[] qn = {"p1", "p5", "p50", "p90", "p95", "p99", "p99.9", "p99.99"};
        for (int i = 0; i < qs.length; i++) t.println(m + qn[i] + ", " + lat.get((int) (n * qs[i])));
        t.println(m + "Return=OK, " + (n - nf));
        if (nf > 0) t.println(m + "Return=NOT_FOUND, " + nf);
      }
    }
  }
}
