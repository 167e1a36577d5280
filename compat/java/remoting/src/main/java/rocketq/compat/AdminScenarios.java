package rocketq.compat;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.rocketmq.tools.command.MQAdminStartup;

/** mqadmin in this JVM: MQAdminStartup.main0 with the request's words, stdout and stderr captured.
 *  main0 catches what a command throws and prints it, as the mqadmin script shows it to an operator.
 *  It needs ${rocketmq.home.dir}/conf/logback_tools.xml (compat/java/rocketmq_home). */
final class AdminScenarios {
    private AdminScenarios() {
    }

    static synchronized Object mqadmin(Args a) {
        PrintStream out = System.out;
        PrintStream err = System.err;
        ByteArrayOutputStream outBuf = new ByteArrayOutputStream();
        ByteArrayOutputStream errBuf = new ByteArrayOutputStream();
        try {
            System.setOut(new PrintStream(outBuf, true, StandardCharsets.UTF_8));
            System.setErr(new PrintStream(errBuf, true, StandardCharsets.UTF_8));
            MQAdminStartup.main0(a.rest.toArray(new String[0]), Clients.hook(a));
        } finally {
            System.out.flush();
            System.err.flush();
            System.setOut(out);
            System.setErr(err);
        }
        Map<String, Object> result = new LinkedHashMap<>();
        result.put("stdout", outBuf.toString(StandardCharsets.UTF_8));
        result.put("stderr", errBuf.toString(StandardCharsets.UTF_8));
        return result;
    }
}
