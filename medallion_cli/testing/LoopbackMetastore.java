/*
 * A Hive Metastore 3.1.3 served on 127.0.0.1 only, for tests (hive_metastore.py starts it):
 *
 *     java -cp '<hive-metastore JARs>/*:<folder of metastore-site.xml>' LoopbackMetastore.java PORT
 *
 * HiveMetaStore.main binds its Thrift port on every interface (3.1.3 has no setting for the
 * address), so this serves the same handler the way its non-SASL, non-setugi mode does, on a
 * socket bound to loopback: HMSHandler behind RetryingHMSHandler, TSetIpAddressProcessor, the
 * binary protocol and a plain transport, which Spark's Hive 2.3 client and Python Thrift clients
 * speak. Only public API of the metastore and of libthrift 0.9.3 is used. The background tasks
 * that HiveMetaStore.main also starts (compaction, ACID housekeeping) are not: tests need none.
 */

import java.net.InetSocketAddress;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hive.metastore.HiveMetaStore;
import org.apache.hadoop.hive.metastore.IHMSHandler;
import org.apache.hadoop.hive.metastore.RetryingHMSHandler;
import org.apache.hadoop.hive.metastore.TSetIpAddressProcessor;
import org.apache.hadoop.hive.metastore.conf.MetastoreConf;
import org.apache.hadoop.hive.metastore.conf.MetastoreConf.ConfVars;
import org.apache.thrift.protocol.TBinaryProtocol;
import org.apache.thrift.protocol.TProtocol;
import org.apache.thrift.server.ServerContext;
import org.apache.thrift.server.TServer;
import org.apache.thrift.server.TServerEventHandler;
import org.apache.thrift.server.TThreadPoolServer;
import org.apache.thrift.transport.TServerSocket;
import org.apache.thrift.transport.TTransport;
import org.apache.thrift.transport.TTransportFactory;

public class LoopbackMetastore {
    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: LoopbackMetastore PORT");
            System.exit(2);
        }
        int port = Integer.parseInt(args[0]);
        // metastore-site.xml from the classpath: the database, warehouse, thread counts
        Configuration conf = MetastoreConf.newMetastoreConf();
        // init=false: the retrying proxy calls init() itself (opens the database, creates the
        // default catalog, database and roles), as HiveMetaStore.startMetaStore has it
        HiveMetaStore.HMSHandler base = new HiveMetaStore.HMSHandler("medallion-test", conf, false);
        IHMSHandler handler = RetryingHMSHandler.getProxy(conf, base, false);
        // bound only now, after init: a port that answers is a metastore that is ready
        TServerSocket socket = new TServerSocket(new InetSocketAddress("127.0.0.1", port));
        TServer server = new TThreadPoolServer(new TThreadPoolServer.Args(socket)
                .processor(new TSetIpAddressProcessor<>(handler))
                .transportFactory(new TTransportFactory())
                .protocolFactory(new TBinaryProtocol.Factory())
                .minWorkerThreads(MetastoreConf.getIntVar(conf, ConfVars.SERVER_MIN_THREADS))
                .maxWorkerThreads(MetastoreConf.getIntVar(conf, ConfVars.SERVER_MAX_THREADS)));
        server.setServerEventHandler(new TServerEventHandler() {
            public void preServe() {
                System.out.println("serving the metastore on 127.0.0.1:" + port);
                System.out.flush();
            }

            public ServerContext createContext(TProtocol in, TProtocol out) {
                return null;
            }

            // A connection's worker thread keeps a RawStore (a database session) of its own:
            // closed when the client goes, as HiveMetaStore does, or each finished connection
            // would keep one until its thread ends.
            public void deleteContext(ServerContext context, TProtocol in, TProtocol out) {
                base.shutdown();
            }

            public void processContext(ServerContext context, TTransport in, TTransport out) {
            }
        });
        server.serve();
    }
}
