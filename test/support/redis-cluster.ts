import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Cluster, Redis } from 'ioredis';
import { REDIS_CLUSTER_OPTIONS } from '../../lib/adapters/redis.js';

/**
 * A real Redis Cluster on this machine for the tests: three masters, each with
 * one replica, on free local ports, in a temporary directory that goes with
 * it. A failed master is replaced by its replica after about two seconds
 * (cluster-node-timeout 1000 ms).
 */
export interface RedisCluster {
  /** The six nodes' addresses, as a cluster client's seed list. */
  readonly nodes: ReadonlyArray<{ host: string; port: number }>;
  /** A cluster client built as a deployment would, with REDIS_CLUSTER_OPTIONS; the caller closes it. */
  client(): Cluster;
  /** The port of the master that serves `key`'s slot now. */
  masterOf(key: string): Promise<number>;
  /** Kills the node at `port` (SIGKILL: no goodbye to the others), and waits until a replica serves its slots. */
  killAndFailOver(port: number): Promise<void>;
  /**
   * Cuts the master at `port` off from its replicas for a second: each replica
   * is made to sleep (DEBUG SLEEP), then the master drops their links, so that
   * its next writes reach none until they wake and reconnect.
   */
  cutReplicas(port: number): Promise<void>;
  /** Starts the killed node again; it rejoins as a replica of the master that replaced it. */
  rejoin(port: number): Promise<void>;
  /** Stops every node and deletes the directory. */
  stop(): Promise<void>;
}

const MASTERS = 3;
const NODE_TIMEOUT_MS = 1000;
const HEALTHY_WITHIN_MS = 20_000;

export async function startRedisCluster(): Promise<RedisCluster> {
  for (const command of ['redis-server', 'redis-cli']) {
    if (spawnSync(command, ['--version']).error) {
      throw new Error(
        `${command} is not installed: the Redis Cluster tests start their own cluster (apt-get install redis-server)`,
      );
    }
  }
  const directory = mkdtempSync(join(tmpdir(), 'impersonation-cluster-'));
  const processes = new Map<number, ChildProcess>();
  const stop = async (): Promise<void> => {
    await Promise.all(
      [...processes.values()].map(async (child) => {
        if (child.exitCode !== null || child.signalCode !== null) return;
        const exited = once(child, 'exit');
        child.kill('SIGKILL');
        await exited;
      }),
    );
    rmSync(directory, { recursive: true, force: true });
  };
  try {
    const ports = await freeClusterPorts(MASTERS * 2);
    const startNode = (port: number): void => {
      const child = spawn(
        'redis-server',
        [
          '--port',
          String(port),
          '--bind',
          '127.0.0.1',
          '--cluster-enabled',
          'yes',
          '--cluster-config-file',
          join(directory, `nodes-${port}.conf`),
          '--cluster-node-timeout',
          String(NODE_TIMEOUT_MS),
          '--dir',
          directory,
          '--save',
          '',
          '--appendonly',
          'no',
          '--logfile',
          join(directory, `${port}.log`),
          // Replicas sync at once (the default waits 5 s for more of them), so that a failover has a copy to promote.
          '--repl-diskless-sync-delay',
          '0',
          // DEBUG SLEEP, over local connections only: how a test holds a replica back.
          '--enable-debug-command',
          'local',
        ],
        { stdio: 'ignore' },
      );
      processes.set(port, child);
    };
    for (const port of ports) startNode(port);
    const started = async (port: number): Promise<boolean> => {
      if (processes.get(port)!.exitCode === null) return ping(port);
      const log = readFileSync(join(directory, `${port}.log`), 'utf8')
        .split('\n')
        .slice(-5)
        .join('\n');
      throw new Error(`Redis Cluster: node ${port} exited at start:\n${log}`);
    };
    await Promise.all(ports.map((port) => waitFor(() => started(port), `node ${port} did not start`)));
    const created = spawnSync(
      'redis-cli',
      ['--cluster', 'create', ...ports.map((port) => `127.0.0.1:${port}`), '--cluster-replicas', '1', '--cluster-yes'],
      { encoding: 'utf8', timeout: 30_000 },
    );
    if (created.status !== 0)
      throw new Error(`redis-cli --cluster create failed:\n${created.stdout}\n${created.stderr}`);
    const nodes = ports.map((port) => ({ host: '127.0.0.1', port }));
    const live = (): number[] =>
      ports.filter((port) => processes.get(port)!.exitCode === null && processes.get(port)!.signalCode === null);
    await waitFor(() => healthy(live()), 'the cluster did not become healthy');

    return {
      nodes,
      client: () => new Cluster(nodes, REDIS_CLUSTER_OPTIONS),
      async masterOf(key) {
        return withNode(live()[0]!, async (redis) => {
          const slot = (await redis.call('CLUSTER', 'KEYSLOT', key)) as number;
          const ranges = (await redis.call('CLUSTER', 'SLOTS')) as Array<[number, number, [string, number]]>;
          const range = ranges.find(([from, to]) => slot >= from && slot <= to);
          if (!range) throw new Error(`no master serves slot ${slot}`);
          return range[2][1];
        });
      },
      async killAndFailOver(port) {
        const child = processes.get(port)!;
        const exited = once(child, 'exit');
        child.kill('SIGKILL');
        await exited;
        await waitFor(() => healthy(live()), `no replica took over from ${port}`);
      },
      async cutReplicas(port) {
        const replication = await withNode(port, (redis) => redis.info('replication'));
        const replicas = [...replication.matchAll(/^slave\d+:ip=[^,]+,port=(\d+)/gm)].map((match) => Number(match[1]));
        // Not awaited: each sleeps for a second, during which it can neither read nor reconnect.
        for (const replica of replicas)
          void withNode(replica, (redis) => redis.call('DEBUG', 'SLEEP', '1')).catch(() => {});
        await new Promise((resolve) => setTimeout(resolve, 100));
        await withNode(port, (redis) => redis.call('CLIENT', 'KILL', 'TYPE', 'replica'));
      },
      async rejoin(port) {
        startNode(port);
        const replicating = () =>
          withNode(port, async (redis) =>
            /role:slave[\s\S]*master_link_status:up/.test(await redis.info('replication')),
          ).catch(() => false);
        await waitFor(
          async () => (await replicating()) && (await healthy(live())) && (await confirmsWrites(port)),
          `node ${port} did not rejoin as a replica`,
        );
      },
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/**
 * Whether the master that `replica` follows has it confirm a write (`WAIT`), as a store that waits
 * for a replica needs: a replica whose link is up may not yet acknowledge what its master writes.
 */
async function confirmsWrites(replica: number): Promise<boolean> {
  const masterPort = await withNode(replica, async (redis) =>
    Number(/master_port:(\d+)/.exec(await redis.info('replication'))?.[1]),
  ).catch(() => Number.NaN);
  if (!Number.isInteger(masterPort)) return false;
  return withNode(masterPort, async (master) => {
    const ranges = (await master.call('CLUSTER', 'SLOTS')) as Array<[number, number, [string, number]]>;
    const owned = ranges.filter(([, , [, port]]) => port === masterPort);
    for (let n = 0; n < 200; n += 1) {
      const key = `rejoin-probe-${n}`;
      const slot = (await master.call('CLUSTER', 'KEYSLOT', key)) as number;
      if (!owned.some(([from, to]) => slot >= from && slot <= to)) continue;
      await master.set(key, '1', 'PX', 10_000);
      return ((await master.call('WAIT', '1', '1000')) as number) >= 1;
    }
    return false;
  }).catch(() => false);
}

/** Every live node sees the cluster ok, every slot is served by a live master, and every replica is in sync. */
async function healthy(ports: number[]): Promise<boolean> {
  const states = await Promise.all(
    ports.map((port) =>
      withNode(port, async (redis) => {
        const info = (await redis.call('CLUSTER', 'INFO')) as string;
        if (!/cluster_state:ok/.test(info)) return false;
        const replication = await redis.info('replication');
        if (/role:slave/.test(replication) && !/master_link_status:up/.test(replication)) return false;
        const ranges = (await redis.call('CLUSTER', 'SLOTS')) as Array<[number, number, [string, number]]>;
        const covered = ranges.reduce((total, [from, to]) => total + to - from + 1, 0);
        return covered === 16384 && ranges.every(([, , [, master]]) => ports.includes(master));
      }).catch(() => false),
    ),
  );
  return states.every(Boolean);
}

async function ping(port: number): Promise<boolean> {
  return withNode(port, async (redis) => (await redis.ping()) === 'PONG').catch(() => false);
}

async function withNode<T>(port: number, use: (redis: Redis) => Promise<T>): Promise<T> {
  const redis = new Redis({
    port,
    host: '127.0.0.1',
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    enableOfflineQueue: false,
  });
  redis.on('error', () => {});
  try {
    await redis.connect();
    return await use(redis);
  } finally {
    redis.disconnect();
  }
}

async function waitFor(probe: () => Promise<boolean>, message: string): Promise<void> {
  const deadline = Date.now() + HEALTHY_WITHIN_MS;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`Redis Cluster: ${message} within ${HEALTHY_WITHIN_MS / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * Ports free now whose cluster-bus port (port + 10000) is free too, both below the kernel's ephemeral
 * range: a port from that range can be taken by any outgoing connection (the probes' own) before the
 * node binds it.
 */
async function freeClusterPorts(count: number): Promise<number[]> {
  const [ephemeralFrom] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8')
    .trim()
    .split(/\s+/)
    .map(Number);
  const below = Math.min(ephemeralFrom ?? 32_768, 65_536) - 10_000;
  const ports: number[] = [];
  for (let tries = 0; ports.length < count; tries += 1) {
    if (tries > 1000) throw new Error(`Redis Cluster: no ${count} free ports below ${below}`);
    const port = 11_000 + Math.floor(Math.random() * (below - 11_000));
    if (ports.includes(port) || ports.includes(port + 10_000) || ports.includes(port - 10_000)) continue;
    const free = async (candidate: number) =>
      listenOnce(candidate).then(
        () => true,
        () => false,
      );
    if ((await free(port)) && (await free(port + 10_000))) ports.push(port);
  }
  return ports;
}

function listenOnce(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      const { port: bound } = server.address() as { port: number };
      server.close(() => resolve(bound));
    });
  });
}
