/**
 * An SSF receiver of the demo: a poll stream of its own at the identity
 * service's transmitter, created when it first polls and deleted when it
 * stops. The resource API (client `resource-api-receiver`) refuses the tokens
 * of every impersonation it names as stopped; the orders application's
 * authorization server (client `orders-auth-receiver`) ends the tokens it
 * issued from an ID-JAG whose session it names.
 */
import type { SsfPollOptions } from '../lib/resource-server/index.js';
import { SESSION_REVOKED_EVENT, SSF_POLL_METHOD } from '../lib/index.js';
import { basic, jsonOf } from './http.js';
import { M2mTokenCache } from './m2m-token.js';

/** What a receiver needs of the identity service, and who it is there. */
export interface ReceiverStreamSettings {
  /** Calls the identity service (bounded). */
  call(target: string, init: RequestInit): Promise<Response>;
  endpoints: { token: string; ssfStreams: string };
  /** The resource indicator the stream API's token is asked for: the Management API's. */
  managementResource: string;
  client: { id: string; secret: string };
  /** Names this receiver's streams: one a run of it left behind (no clean stop) is deleted to make room. */
  description: string;
}

export interface ReceiverStream {
  /** What the helper's `ssf` option takes. */
  ssf: SsfPollOptions;
  /** Resolves when the poller asks for the stream a second time: its first read is over. */
  firstRead: Promise<void>;
  /** Deletes the stream, when one was created. */
  close(): Promise<void>;
}

export function receiverStream(deps: ReceiverStreamSettings): ReceiverStream {
  const { description } = deps;
  const tokens = new M2mTokenCache(async () => {
    const response = await deps.call(deps.endpoints.token, {
      method: 'POST',
      headers: {
        authorization: basic(deps.client.id, deps.client.secret),
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: new URLSearchParams({
        grant_type: 'client_credentials',
        resource: deps.managementResource,
        scope: 'ssf.manage ssf.read',
      }),
    });
    const body = await jsonOf(response);
    if (typeof body?.['access_token'] !== 'string' || typeof body['expires_in'] !== 'number') {
      throw new Error(`the SSF receiver's token was refused (${response.status})`);
    }
    return { value: body['access_token'], expiresIn: body['expires_in'] };
  });

  async function streamApi(method: string, target: string, body?: unknown): Promise<Response> {
    return deps.call(target, {
      method,
      headers: {
        authorization: `Bearer ${await tokens.get()}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  }

  async function create(): Promise<{ id: string; endpoint: string }> {
    const request = {
      delivery: { method: SSF_POLL_METHOD },
      events_requested: [SESSION_REVOKED_EVENT],
      description,
    };
    let response = await streamApi('POST', deps.endpoints.ssfStreams, request);
    if (response.status === 409) {
      // Streams this same backend left behind: the receiver's bound is full of them.
      const listed = await streamApi('GET', deps.endpoints.ssfStreams);
      const streams = listed.ok ? ((await listed.json()) as Array<{ stream_id?: unknown; description?: unknown }>) : [];
      for (const stream of streams) {
        if (stream.description !== description || typeof stream.stream_id !== 'string') continue;
        await streamApi('DELETE', `${deps.endpoints.ssfStreams}?stream_id=${encodeURIComponent(stream.stream_id)}`);
      }
      response = await streamApi('POST', deps.endpoints.ssfStreams, request);
    }
    const body = await jsonOf(response);
    const endpoint = (body?.['delivery'] as { endpoint_url?: unknown } | undefined)?.endpoint_url;
    if (response.status !== 201 || typeof body?.['stream_id'] !== 'string' || typeof endpoint !== 'string') {
      throw new Error(`the SSF stream could not be created (${response.status})`);
    }
    return { id: body['stream_id'], endpoint };
  }

  let stream: Promise<{ id: string; endpoint: string }> | undefined;
  let asked = 0;
  let firstReadOver = () => {};
  const firstRead = new Promise<void>((resolve) => {
    firstReadOver = resolve;
  });
  return {
    firstRead,
    ssf: {
      endpoint: async () => {
        asked += 1;
        if (asked === 2) firstReadOver();
        // Created once; a failed creation is tried again at the next poll.
        stream ??= create().catch((error: unknown) => {
          stream = undefined;
          throw error;
        });
        return (await stream).endpoint;
      },
      accessToken: () => tokens.get(),
      audience: deps.client.id,
      // The identity service runs on this machine: its clock is this one.
      clockSkew: 0,
    },
    async close() {
      const created = await stream?.catch(() => undefined);
      if (!created) return;
      // Not through deps.call: at shutdown the identity service may be gone already, which is no failure to log.
      await fetch(`${deps.endpoints.ssfStreams}?stream_id=${encodeURIComponent(created.id)}`, {
        method: 'DELETE',
        headers: { authorization: `Bearer ${await tokens.get().catch(() => '')}` },
        signal: AbortSignal.timeout(1000),
      }).catch(() => {});
    },
  };
}
