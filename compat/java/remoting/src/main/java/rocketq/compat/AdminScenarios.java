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

    /** Some commands end with System.exit (a usage error, a command that finishes by exiting); in this JVM that
     *  would end every scenario after it, so an exit during mqadmin becomes an exception, reported with the
     *  status (the JVM runs with -Djava.security.manager=allow). */
    static final class ExitCalled extends SecurityException {
        final int status;

        ExitCalled(int status) {
            super("mqadmin called System.exit(" + status + ")");
            this.status = status;
        }
    }

    @SuppressWarnings("removal")
    private static final class NoExit extends SecurityManager {
        @Override
        public void checkPermission(java.security.Permission perm) {
        }

        @Override
        public void checkExit(int status) {
            throw new ExitCalled(status);
        }
    }

    /** mqadmin 4.9.8 ignores the hook given to main0 and signs with ${rocketmq.home.dir}/conf/tools.yml (as
     *  operators configure it); 5.x uses the hook. With ak/sk the file exists for this one command. */
    private static void withToolsYml(Args a, Runnable command) {
        java.nio.file.Path yml = java.nio.file.Path.of(System.getProperty("rocketmq.home.dir"), "conf", "tools.yml");
        String ak = a.get("ak", null);
        try {
            if (ak != null) {
                java.nio.file.Files.writeString(yml, "accessKey: " + ak + "\nsecretKey: " + a.get("sk") + "\n");
            }
            command.run();
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        } finally {
            try {
                java.nio.file.Files.deleteIfExists(yml);
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        }
    }

    @SuppressWarnings("removal")
    static synchronized Object mqadmin(Args a) {
        PrintStream out = System.out;
        PrintStream err = System.err;
        ByteArrayOutputStream outBuf = new ByteArrayOutputStream();
        ByteArrayOutputStream errBuf = new ByteArrayOutputStream();
        Integer exitStatus = null;
        SecurityManager before = System.getSecurityManager();
        try {
            System.setOut(new PrintStream(outBuf, true, StandardCharsets.UTF_8));
            System.setErr(new PrintStream(errBuf, true, StandardCharsets.UTF_8));
            System.setSecurityManager(new NoExit());
            withToolsYml(a, () -> MQAdminStartup.main0(a.rest.toArray(new String[0]), Clients.hook(a)));
        } catch (ExitCalled e) {
            exitStatus = e.status;
        } finally {
            System.setSecurityManager(before);
            System.out.flush();
            System.err.flush();
            System.setOut(out);
            System.setErr(err);
        }
        Map<String, Object> result = new LinkedHashMap<>();
        result.put("stdout", outBuf.toString(StandardCharsets.UTF_8));
        result.put("stderr", errBuf.toString(StandardCharsets.UTF_8));
        result.put("exit", exitStatus);
        return result;
    }
}
