/**
 * Loaded into the demo's process by bench/demo-path.ts (`node --import`), so
 * that the demo itself runs unchanged: over the IPC channel the bench opens,
 * it reports the process's CPU time and starts and stops V8's CPU profiler
 * around each timed window, writing the profile where it is told.
 * Its frames are the bench's (bench/profile.ts leaves them out).
 */
import { writeFile } from 'node:fs/promises';
import { Session } from 'node:inspector/promises';
import { readStat } from './proc-stat.js';

export type DemoProbeRequest =
  | { id: number; type: 'cpu' }
  | { id: number; type: 'profile-start' }
  | { id: number; type: 'profile-stop'; file: string };

export interface DemoProbeReply {
  id: number;
  /** Microseconds of CPU (user and system, every thread) since the process started. */
  cpu?: number;
  /** Of `cpu`, the main thread's (from /proc; absent without it). */
  mainCpu?: number;
  error?: string;
}

let profiler: Session | undefined;

function mainThreadCpu(): { mainCpu?: number } {
  try {
    return { mainCpu: readStat(`/proc/self/task/${process.pid}/stat`).cpuSeconds * 1e6 };
  } catch {
    return {};
  }
}

async function answer(request: DemoProbeRequest): Promise<DemoProbeReply> {
  switch (request.type) {
    case 'cpu': {
      const { user, system } = process.cpuUsage();
      return { id: request.id, cpu: user + system, ...mainThreadCpu() };
    }
    case 'profile-start':
      if (!profiler) {
        profiler = new Session();
        profiler.connect();
        await profiler.post('Profiler.enable');
      }
      await profiler.post('Profiler.start');
      return { id: request.id };
    case 'profile-stop': {
      if (!profiler) throw new Error('the profiler was not started');
      const { profile } = await profiler.post('Profiler.stop');
      await writeFile(request.file, JSON.stringify(profile));
      return { id: request.id };
    }
  }
}

if (process.send) {
  process.on('message', (request: DemoProbeRequest) => {
    answer(request).then(
      (reply) => process.send?.(reply),
      (error: unknown) => process.send?.({ id: request.id, error: String(error) }),
    );
  });
  // The IPC channel alone must not keep the demo alive once it stops.
  process.channel?.unref();
}
