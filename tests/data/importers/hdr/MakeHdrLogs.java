// Writes HdrHistogram interval logs with HdrHistogram's own Java classes, over every
// number of significant figures (0 to 5) and ranges up to Long.MAX_VALUE, and beside each
// log what Java itself reads back from it: every recorded value of every interval
// (HistogramLogReader, then recordedValues(): valueIteratedTo and the count added).
// Run: java -cp /usr/share/java/hdrhistogram.jar MakeHdrLogs.java OUTDIR
// (Debian: libhdrhistogram-java). tests/importers/test_hdr_decode.py runs it into a
// temporary directory and compares the kit's decoder with the .expected files.
import java.io.*;
import java.util.*;
import org.HdrHistogram.*;

public class MakeHdrLogs {
  public static void main(String[] args) throws IOException {
    File dir = new File(args[0]);
    long[][] ranges = {{1, 3_600_000_000L}, {1, 1L << 40}, {1000, 1L << 50},
                       {1, Long.MAX_VALUE}, {7, Long.MAX_VALUE / 3}};
    Random rnd = new Random(48);
    for (int digits = 0; digits <= 5; digits++) {
      for (long[] range : ranges) {
        String name = "d" + digits + "_lo" + range[0] + "_hi" + range[1];
        File log = new File(dir, name + ".hlog");
        try (PrintStream out = new PrintStream(new FileOutputStream(log), false)) {
          HistogramLogWriter w = new HistogramLogWriter(out);
          w.outputComment("[Logging for: " + name + "]");
          w.outputLogFormatVersion();
          w.outputStartTime(1700000000000L);
          w.setBaseTime(1700000000000L);
          w.outputLegend();
          for (int interval = 0; interval < 4; interval++) {
            Histogram h = new Histogram(range[0], range[1], digits);
            int n = interval == 3 ? 0 : 50 + rnd.nextInt(400);  // the last one empty
            for (int i = 0; i < n; i++) {
              // Log-uniform over the whole range, the top buckets included.
              double exp = Math.log(range[0]) + rnd.nextDouble()
                  * (Math.log(range[1]) - Math.log(range[0]));
              long v = Math.max(range[0], Math.min(range[1], (long) Math.exp(exp)));
              h.recordValueWithCount(v, 1 + rnd.nextInt(3));
            }
            if (interval == 1) {
              h.recordValue(range[0]);
              h.recordValue(range[1]);  // the highest trackable value itself
            }
            h.setStartTimeStamp(1700000000000L + interval * 1000L);
            h.setEndTimeStamp(1700000000000L + interval * 1000L + 1000L);
            w.outputIntervalHistogram(h);
          }
        }
        // What Java reads back from the log it wrote: interval, value, count.
        try (PrintWriter exp = new PrintWriter(new File(dir, name + ".expected"))) {
          HistogramLogReader r = new HistogramLogReader(log);
          int interval = 0;
          EncodableHistogram e;
          while ((e = r.nextIntervalHistogram()) != null) {
            Histogram h = (Histogram) e;
            for (HistogramIterationValue v : h.recordedValues()) {
              exp.println(interval + "," + v.getValueIteratedTo() + ","
                          + v.getCountAddedInThisIterationStep());
            }
            interval++;
          }
          exp.println("intervals," + interval);
        }
      }
    }
  }
}
