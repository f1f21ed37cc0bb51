import com.sun.net.httpserver.HttpServer;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;

/**
 * A jar that is no Spring app, for the jar kind's tests: it listens where its arguments say
 * (--listen=N; 0: a port of its own choosing, as an app that ignores the one it was given)
 * and answers every request 200 (but /actuator/prometheus 404, as Actuator does when the
 * endpoint is not exposed); with --fork it first starts a child that sleeps, so the
 * tests see that a JVM's whole process tree is stopped.
 */
public class Tiny {
    public static void main(String[] args) throws Exception {
        for (String arg : args) {
            if (arg.equals("--fork")) {
                Process child = new ProcessBuilder("sleep", "600").inheritIO().start();
                System.out.println("forked " + child.pid());
            }
        }
        for (String arg : args) {
            if (!arg.startsWith("--listen=")) {
                continue;
            }
            int port = Integer.parseInt(arg.substring("--listen=".length()));
            HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", port), 64);
            server.createContext("/", exchange -> {
                byte[] body = "{\"status\":\"UP\"}".getBytes(StandardCharsets.UTF_8);
                String path = exchange.getRequestURI().getPath();
                int status = path.equals("/actuator/prometheus") ? 404 : 200;
                exchange.sendResponseHeaders(status, body.length);
                exchange.getResponseBody().write(body);
                exchange.close();
            });
            server.start();
            System.out.println("listening on 127.0.0.1:" + server.getAddress().getPort());
        }
        System.out.flush();
        Thread.currentThread().join();
    }
}
