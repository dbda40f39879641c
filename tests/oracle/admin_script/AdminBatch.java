// The real pulsar-admin (PulsarAdminTool of pulsar-client-tools), many commands in one JVM, as
// pulsar-shell runs them: a JVM start costs seconds on the shared machine, so one per command
// would make a script of sixty commands take minutes per target.
//
//   java -cp TOOLS_LIB/* AdminBatch.java CLIENT_CONF OUT_DIR
//
// Reads one command a line on stdin, its arguments separated by tabs; runs it through the same
// PulsarAdminTool.run(args) that pulsar-admin's main calls (whose answer main turns into exit
// code 0 or 1); writes N.out and N.err (what the command printed) and N.log (what the tool
// logged meanwhile: the admin client's warnings name the HTTP status) to OUT_DIR and then
// prints "done N RC" on stdout, N counting commands from 1. Ends at end of input.
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.FileDescriptor;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Properties;
import org.apache.pulsar.admin.cli.PulsarAdminTool;

public class AdminBatch {
    /** An output stream whose bytes go to whichever buffer the current command owns: the tool
     *  may keep a reference to System.out/err taken when it was built. */
    static final class Switch extends OutputStream {
        ByteArrayOutputStream target = new ByteArrayOutputStream();

        @Override public synchronized void write(int b) { target.write(b); }
        @Override public synchronized void write(byte[] b, int off, int len) { target.write(b, off, len); }

        synchronized byte[] take() {
            byte[] bytes = target.toByteArray();
            target = new ByteArrayOutputStream();
            return bytes;
        }
    }

    /** PulsarAdminTool.run is protected: a subclass may call it, from any package. */
    static final class Tool extends PulsarAdminTool {
        Tool(Properties p) throws Exception { super(p); }
        boolean runOne(String[] args) { return run(args); }
    }

    public static void main(String[] argv) throws Exception {
        PrintStream real = new PrintStream(new FileOutputStream(FileDescriptor.out), true,
                StandardCharsets.UTF_8);
        Path outDir = Path.of(argv[1]);
        Files.createDirectories(outDir);
        Switch out = new Switch();
        Switch err = new Switch();
        Switch log = new Switch();
        // log4j's console appender keeps the System.err of its start: start it now, on the log's
        // own stream, so a warning never mixes with what the command prints.
        System.setErr(new PrintStream(log, true, StandardCharsets.UTF_8));
        org.apache.logging.log4j.LogManager.getLogger(AdminBatch.class).debug("started");
        System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
        System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
        Properties props = new Properties();
        try (FileInputStream in = new FileInputStream(argv[0])) {
            props.load(in);
        }
        Tool tool = new Tool(props);
        BufferedReader lines = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        int n = 0;
        String line;
        while ((line = lines.readLine()) != null) {
            n++;
            String[] args = line.isEmpty() ? new String[0] : line.split("\t", -1);
            int rc;
            try {
                rc = tool.runOne(args) ? 0 : 1;
            } catch (Throwable t) {  // pulsar-admin's main would die of it: exit code 1
                t.printStackTrace(System.err);
                rc = 1;
            }
            System.out.flush();
            System.err.flush();
            Files.write(outDir.resolve(n + ".out"), out.take());
            Files.write(outDir.resolve(n + ".err"), err.take());
            Files.write(outDir.resolve(n + ".log"), log.take());
            real.println("done " + n + " " + rc);
        }
        // As pulsar-admin's main ends: at once, without waiting for the client's threads.
        Runtime.getRuntime().halt(0);
    }
}
