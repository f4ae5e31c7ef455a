package kubesearch.testbed;

import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.opensearch.analysis.common.CommonAnalysisPlugin;
import org.opensearch.common.logging.LogConfigurator;
import org.opensearch.common.settings.Settings;
import org.opensearch.env.Environment;
import org.opensearch.index.mapper.MapperExtrasPlugin;
import org.opensearch.index.reindex.ReindexPlugin;
import org.opensearch.node.InternalSettingsPreparer;
import org.opensearch.node.Node;
import org.opensearch.plugins.Plugin;
import org.opensearch.transport.Netty4Plugin;

/**
 * Starts a real OpenSearch node for the kubesearch test bed from jars resolved out of Maven Central.
 *
 * <p>Usage: {@code java -cp 'libs/*' kubesearch.testbed.OpenSearchNode PATH_HOME}. Settings come from
 * PATH_HOME/config/opensearch.yml and logging from PATH_HOME/config/log4j2.properties, both written by
 * tests/testbed/java.sh, exactly as the distribution's own launcher reads them.
 *
 * <p>The distribution's entry point, org.opensearch.bootstrap.OpenSearch, goes through Bootstrap, which
 * installs the security manager (needing the distribution's policy files), checks the jars for duplicate
 * classes, initialises native code and refuses to run as root ("can not run opensearch as root" is
 * thrown by Bootstrap.initializeNatives), then runs the production bootstrap checks from its own
 * subclass of Node. None of that is wanted for a loopback test node that may run as root in a sandbox,
 * so this launcher constructs Node itself. The plain Node's validateNodeBeforeAcceptingRequests is a
 * no-op, and nothing in Node checks the user id, so no setting is needed to allow root.
 *
 * <p>The modules that a distribution loads from its modules/ directory are handed to Node as classpath
 * plugins through its protected constructor, the same way OpenSearch's own test framework (MockNode)
 * does it.
 */
public final class OpenSearchNode {

    /** The modules the test bed needs: HTTP/transport, delete-by-query, common analysis, extra mappers. */
    static final List<Class<? extends Plugin>> MODULES = List.of(
        Netty4Plugin.class,         // transport-netty4: the HTTP and transport layers
        ReindexPlugin.class,        // reindex: _delete_by_query, _update_by_query, _reindex
        CommonAnalysisPlugin.class, // analysis-common
        MapperExtrasPlugin.class    // mapper-extras: scaled_float, search_as_you_type, ...
    );

    /** Node's constructor that takes classpath plugins is protected, hence this subclass. */
    static final class TestbedNode extends Node {
        TestbedNode(Environment environment, Collection<Class<? extends Plugin>> plugins) {
            // forbidPrivateIndexSettings=true: behave like a production node, refuse private settings.
            super(environment, plugins, true);
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: OpenSearchNode PATH_HOME");
            System.exit(2);
        }
        Path home = Paths.get(args[0]).toAbsolutePath();
        try {
            // Same steps as Bootstrap.init, minus the parts described above: read opensearch.yml from
            // config/, then configure log4j from config/log4j2.properties.
            Environment env = InternalSettingsPreparer.prepareEnvironment(
                Settings.builder().put(Environment.PATH_HOME_SETTING.getKey(), home.toString()).build(),
                Map.of(), home.resolve("config"), () -> "testbed");
            // The node name first: the %node_name pattern converter reads it when log4j is configured.
            if (Node.NODE_NAME_SETTING.exists(env.settings())) {
                LogConfigurator.setNodeName(Node.NODE_NAME_SETTING.get(env.settings()));
            }
            LogConfigurator.registerErrorListener();
            LogConfigurator.configure(env);

            Node node = new TestbedNode(env, MODULES);
            // SIGTERM (stop_service) closes the node cleanly, flushing shards and releasing node.lock.
            // SIGKILL needs nothing: the OS drops the lock and the translog recovers on the next start.
            CountDownLatch stopped = new CountDownLatch(1);
            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                try {
                    node.close();
                    node.awaitClose(10, TimeUnit.SECONDS);
                } catch (Exception e) {
                    e.printStackTrace();
                } finally {
                    stopped.countDown();
                }
            }, "testbed-node-shutdown"));
            node.start();
            System.out.println("testbed: OpenSearch node started");
            // Node's threads may all be daemons; hold the JVM until the shutdown hook has run.
            stopped.await();
        } catch (Throwable t) {
            // Any failure to start must end the JVM, or it lingers with half-started thread pools.
            t.printStackTrace();
            System.err.flush();
            Runtime.getRuntime().halt(1);
        }
    }
}
