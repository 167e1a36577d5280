package rocketq.compat.grpc;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;

/** One JVM running the gRPC client's scenarios on request, with the remoting runner's line protocol:
 *  "scenario\tkey=value..." in, "@@RESULT {json}" out (see ../remoting Runner). */
public final class GrpcRunner {
    private GrpcRunner() {
    }

    public static void main(String[] argv) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        System.out.println("@@RESULT " + Json.write(Map.of("scenario", "ready", "ok", true)));
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
                result.put("data", GrpcScenarios.run(args));
                result.put("ok", true);
            } catch (Throwable t) {
                StringWriter trace = new StringWriter();
                t.printStackTrace(new PrintWriter(trace));
                result.put("ok", false);
                result.put("error", trace.toString());
            }
            result.put("millis", (System.nanoTime() - start) / 1_000_000);
            System.out.println("@@RESULT " + Json.write(result));
            System.out.flush();
        }
        System.exit(0);
    }
}
