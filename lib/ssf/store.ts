import { randomUUID } from 'node:crypto';
import type { SsfStreamAdapter } from '../adapters/contracts/ssf.js';
import { recordOf, recordPayload } from '../adapters/records.js';
import type { ResolvedSsfOptions } from './options.js';

export type StreamStatus = 'enabled' | 'paused' | 'disabled';

type StreamDelivery =
  { method: 'urn:ietf:rfc:8935'; endpointUrl: string; authorizationHeader?: string } | { method: 'urn:ietf:rfc:8936' };

/** SETs awaiting a poll, by `jti`, and whether others wait. */
export type SetPage = Awaited<ReturnType<StreamStore['queued']>>;

/** A stream as kept: who created it (the receiver's client), what it asked for, how it is delivered, its status. */
export interface StreamRecord {
  id: string;
  receiver: string;
  audience: string;
  eventsRequested: string[];
  delivery: StreamDelivery;
  description?: string;
  status: StreamStatus;
  reason?: string;
  createdAt: number;
  /** When a verification was last asked for (seconds), for `min_verification_interval`. */
  verifiedAt?: number;
}

type QueueBounds = Pick<ResolvedSsfOptions, 'retentionSeconds' | 'maxQueued'>;

/** The kinds the SSF streams and the SETs awaiting a poll are kept as. */
const STREAM = 'SsfStream';
const QUEUED = 'SsfQueuedSet';
const ALL = 'streams';
const ofReceiver = (receiver: string) => `streams:${receiver}`;
/** One member while the stream exists: what an update checks after writing, since the adapter has no compare-and-set. */
const aliveOf = (streamId: string) => `alive:${streamId}`;
const queueOf = (streamId: string) => `queue:${streamId}`;
const streamKey = (id: string) => `stream:${id}`;
const setKey = (streamId: string, jti: string) => `set:${streamId}:${jti}`;
/** Streams have no expiry: their index members carry the last millisecond of year 9999. */
const NEVER = 253_402_300_799_000;

/** SSF streams and poll queues on the plugin's adapter, shared by every instance; Invariant 58. */
export class StreamStore {
  constructor(private readonly adapter: SsfStreamAdapter) {}

  /** Streams in all and of one receiver, each counted up to `limit`. */
  async count(receiver: string, limit: number): Promise<{ all: number; receiver: number }> {
    const [all, own] = await Promise.all([
      this.adapter.indexRange(ALL, undefined, limit),
      this.adapter.indexRange(ofReceiver(receiver), undefined, limit),
    ]);
    return { all: all.length, receiver: own.length };
  }

  /** Invariant 58: writes a new stream, then counts again. */
  async create(
    stream: StreamRecord,
    bounds: { all: number; receiver: number },
  ): Promise<'created' | 'receiver' | 'all'> {
    // The record first: an index member without its record would be a stream nobody can read or delete.
    await this.#writeRecord(stream);
    await this.adapter.indexAdd([ALL, ofReceiver(stream.receiver), aliveOf(stream.id)], stream.id, NEVER);
    const counted = await this.count(stream.receiver, bounds.all + 1);
    const broken = counted.receiver > bounds.receiver ? 'receiver' : counted.all > bounds.all ? 'all' : undefined;
    if (broken === undefined) return 'created';
    await this.remove(stream);
    return broken;
  }

  /** Invariant 58: writes a changed stream; `false`, leaving nothing, when it was deleted meanwhile. */
  async update(stream: StreamRecord): Promise<boolean> {
    // Checked all the same after a failed write: it may have been applied.
    const failure = await this.#writeRecord(stream).catch((error: unknown) => ({ error }));
    const alive = (await this.adapter.indexRange(aliveOf(stream.id), undefined, 1)).length > 0;
    if (!alive) await this.adapter.destroy(streamKey(stream.id));
    if (failure) throw failure.error;
    return alive;
  }

  /** The stream's one verification until `until` (ms), or undefined (racing claims may all be refused); resolves its release. */
  async claimVerification(streamId: string, until: number): Promise<(() => Promise<void>) | undefined> {
    const [index, claim] = [`verifying:${streamId}`, randomUUID()];
    const release = () => this.adapter.indexRemove([index], claim);
    await this.adapter.indexAdd([index], claim, until);
    if ((await this.adapter.indexRange(index, undefined, 2)).length === 1) return release;
    await release();
    return undefined;
  }

  async #writeRecord(stream: StreamRecord): Promise<void> {
    await this.adapter.upsert(streamKey(stream.id), recordPayload(STREAM, stream));
  }

  async find(id: string): Promise<StreamRecord | undefined> {
    return recordOf<StreamRecord>(STREAM, await this.adapter.find(streamKey(id)));
  }

  /** Removes the stream, then its poll queue: SETs nobody may poll any more. */
  async remove(stream: StreamRecord): Promise<void> {
    await this.adapter.indexRemove([ALL, ofReceiver(stream.receiver), aliveOf(stream.id)], stream.id);
    await this.adapter.destroy(streamKey(stream.id));
    for (;;) {
      const queued = (await this.adapter.indexRange(queueOf(stream.id), undefined, 100)).map(({ member }) => member);
      if (!queued.length) return;
      await this.acknowledge(stream.id, queued);
    }
  }

  /** A receiver's streams, or every stream, at most `limit`. */
  async list(receiver: string | undefined, limit: number): Promise<StreamRecord[]> {
    const index = receiver === undefined ? ALL : ofReceiver(receiver);
    const entries = await this.adapter.indexRange(index, undefined, limit);
    const streams = await Promise.all(entries.map((entry) => this.find(entry.member)));
    return streams.filter((stream): stream is StreamRecord => stream !== undefined);
  }

  /** Holds a SET for polling until acknowledged or `retentionSeconds` pass; `false` when the queue is full. */
  async enqueue(streamId: string, jti: string, jwt: string, bounds: QueueBounds): Promise<boolean> {
    const { retentionSeconds, maxQueued } = bounds;
    const queued = await this.adapter.indexRange(queueOf(streamId), undefined, maxQueued);
    if (queued.length >= maxQueued && !queued.some((entry) => entry.member === jti)) return false;
    await this.adapter.upsert(setKey(streamId, jti), recordPayload(QUEUED, { jwt }), retentionSeconds);
    await this.adapter.indexAdd([queueOf(streamId)], jti, Date.now() + retentionSeconds * 1000);
    return true;
  }

  /** Up to `limit` SETs awaiting acknowledgement, by `jti`; `more` when others wait. */
  async queued(streamId: string, limit: number) {
    const entries = await this.adapter.indexRange(queueOf(streamId), undefined, limit + 1);
    const page = entries.slice(0, limit);
    const payloads = await Promise.all(page.map(({ member }) => this.adapter.find(setKey(streamId, member))));
    const sets = new Map<string, string>();
    payloads.forEach((payload, index) => {
      const jwt = (payload as { jwt?: unknown } | undefined)?.jwt;
      if (typeof jwt === 'string') sets.set(page[index]!.member, jwt);
    });
    return { sets, more: entries.length > limit };
  }

  /** Forgets acknowledged (or reported) SETs; unknown `jti`s change nothing. */
  async acknowledge(streamId: string, jtis: readonly string[]): Promise<void> {
    await Promise.all(
      jtis.map(async (jti) => {
        await this.adapter.indexRemove([queueOf(streamId)], jti);
        await this.adapter.destroy(setKey(streamId, jti));
      }),
    );
  }
}
