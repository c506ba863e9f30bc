/** The ioredis client as the calls the adapter makes: ioredis 5 and 6 classes never assign to each other; RESP3 mapping does not fit. */
export interface RedisClient {
  readonly isCluster: boolean;
  readonly status: string;
  readonly options: {
    autoPipeliningIgnoredCommands?: string[] | undefined;
    /** ioredis 6 only; the adapter reads the legacy (RESP2-shaped) replies. */
    replyMapping?: string | undefined;
  };
  defineCommand(name: string, definition: { lua: string; numberOfKeys?: number }): void;
  on(event: 'error' | 'ready', listener: () => void): unknown;
  on(event: '+node', listener: (node: RedisNode) => void): unknown;
  off(event: 'ready', listener: () => void): unknown;
  connect(): Promise<void>;
  quit(): Promise<unknown>;
  disconnect(): void;
  pipeline(): RedisPipeline;
  get(key: string): Promise<string | null>;
  set(key: string, value: string): Promise<unknown>;
  set(key: string, value: string, unit: 'PX', milliseconds: number): Promise<unknown>;
  del(key: string): Promise<number>;
  hget(key: string, field: string): Promise<string | null>;
  hmget(key: string, ...fields: string[]): Promise<Array<string | null>>;
  hgetall(key: string): Promise<Record<string, string>>;
  smembers(key: string): Promise<string[]>;
  zrem(key: string, member: string): Promise<number>;
  /** Indexes as strings: ioredis 6 types ZRANGE's `stop` as one. */
  zrange(key: string, start: string, stop: string): Promise<string[]>;
  zrevrange(key: string, start: number, stop: number, withScores: 'WITHSCORES'): Promise<string[]>;
  zrevrangebyscore(
    key: string,
    max: string,
    min: string,
    withScores: 'WITHSCORES',
    limit: 'LIMIT',
    offset: number,
    count: number,
  ): Promise<string[]>;
  /** A `Cluster`'s connections to its nodes. */
  nodes?(role: 'all'): RedisNode[];
  /** A `Cluster` reads which node serves which slot again. */
  refreshSlotsCache?(callback: () => void): void;
}

/** One node's connection of a `Cluster`. */
export interface RedisNode {
  readonly status: string;
  connect(): Promise<void>;
}

/** A pipeline (MULTI-less batch) of the client; the adapter queues its scripts and `WAIT` on it. */
export interface RedisPipeline {
  wait(replicas: number, timeoutMs: number): RedisPipeline;
  exec(): Promise<Array<[error: Error | null, reply: unknown]> | null>;
}

/** What a `Cluster` has and a standalone client lacks; `undefined` for a standalone client. */
export function clusterOf(client: RedisClient): Required<Pick<RedisClient, 'nodes' | 'refreshSlotsCache'>> | undefined {
  if (!client.isCluster || !client.nodes || !client.refreshSlotsCache) return undefined;
  return { nodes: client.nodes.bind(client), refreshSlotsCache: client.refreshSlotsCache.bind(client) };
}
