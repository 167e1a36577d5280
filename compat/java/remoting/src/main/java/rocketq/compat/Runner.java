package rocketq.compat;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;

/** One JVM, many scenarios. Reads one request per line on stdin (tab-separated: the scenario's name, then
 *  key=value arguments; the mqadmin scenario takes the command's own words after a lone "--"), runs it and
 *  prints one line "@@RESULT {json}" per request: {"scenario", "ok", "millis", "data" or "error"}.
 *  The Python side (tests/compat/java_runner.py) decides whether what arrived is right; a scenario only
 *  reports what it sent and what it saw, and fails by itself only on a timeout or an exception.
 *  Client logs go to files (-Drocketmq.client.logRoot), so stdout carries nothing but result lines and
 *  what mqadmin prints, which the mqadmin scenario captures. */
public final class Runner {
    public static final String RESULT_PREFIX = "@@RESULT ";

    private Runner() {
    }

    public static void main(String[] argv) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        System.out.println(RESULT_PREFIX + Json.write(Map.of("scenario", "ready", "ok", true)));
        System.out.flush();
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            Args args = Args.parse(line);
            if (args.name.equals("exit")) {
                break;
            }
            Map<String, Object> result = new LinkedHashMap<>();
            result.put("scenario", args.name);
            long start = System.nanoTime();
            try {
                result.put("data", Scenarios.run(args));
                result.put("ok", true);
            } catch (Throwable t) {
                StringWriter trace = new StringWriter();
                t.printStackTrace(new PrintWriter(trace));
                result.put("ok", false);
                result.put("error", trace.toString());
            }
            result.put("millis", (System.nanoTime() - start) / 1_000_000);
            System.out.println(RESULT_PREFIX + Json.write(result));
            System.out.flush();
        }
        System.exit(0);            // client threads (non-daemon in some versions) must not keep the JVM alive
    }
}
