/**
 * The resource API as an SSF receiver: a poll stream of its own at the
 * identity service's transmitter (the client `resource-api-receiver`), created
 * when it first polls and deleted when it stops (receiver-stream.ts). The
 * resource-server helper polls it and refuses the tokens of every
 * impersonation it names as stopped.
 */
import type { BackendDependencies } from './backend-dependencies.js';
import { receiverStream, type ReceiverStream } from './receiver-stream.js';
import { CLIENTS } from './seed.js';

export function resourceApiStream(deps: BackendDependencies): ReceiverStream {
  return receiverStream({
    ...deps,
    client: { id: CLIENTS.resourceApiReceiver, secret: deps.secrets.resourceApiReceiverClientSecret },
    // Names the streams of this backend: one a run of it left behind (no clean stop) is deleted to make room.
    description: `demo resource API at ${deps.url}`,
  });
}
