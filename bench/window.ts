/**
 * One timed window: autocannon against the provider for a number of seconds,
 * with the CPU the provider, the load generator and the rest of the machine
 * used meanwhile.
 */
import { readFileSync } from 'node:fs';
import { fire, type RequestSpec, type RunRecord } from './load.js';
import type { ServerProcess } from './server-process.js';

export interface WindowResult {
  run: RunRecord;
  /** Provider CPU seconds (all its threads). */
  serverCpu: number;
  /** Of serverCpu, the main thread's (NaN without /proc). */
  mainCpu: number;
  /** Of serverCpu, that of V8's helper threads: concurrent GC and compilation (NaN without /proc). */
  v8Cpu: number;
  /** CPU seconds the rest of the machine used (Redis, other processes); NaN off Linux. */
  otherCpu: number;
}

export interface WindowOptions {
  connections: number;
  seconds: number;
  requests: RequestSpec[];
  /** Where the provider's CPU profile of the window goes; none when undefined. */
  profileFile?: string | undefined;
}

export async function timedWindow(server: ServerProcess, options: WindowOptions): Promise<WindowResult> {
  const { connections, seconds, requests, profileFile } = options;
  // Every window starts with an empty young generation: the top-up before an
  // exchange window would otherwise leave its garbage to that window, and to no
  // other. Only a scavenge: after a full GC, V8 compiled the hot code again (bench/server.ts).
  await server.settle();
  if (profileFile) await server.profileStart();
  const before = await server.stats();
  const machineBefore = machineCpuSeconds();
  const run = await fire({ base: server.base, connections, duration: seconds, requests });
  const machineAfter = machineCpuSeconds();
  const after = await server.stats();
  if (profileFile) await server.profileStop(profileFile);
  const serverCpu = (after.cpu.user + after.cpu.system - before.cpu.user - before.cpu.system) / 1e6;
  const otherCpu = Math.max(0, machineAfter - machineBefore - serverCpu - run.generatorCpu);
  const mainCpu = after.threads && before.threads ? after.threads.main - before.threads.main : Number.NaN;
  const v8Cpu =
    after.threads?.v8 != null && before.threads?.v8 != null ? after.threads.v8 - before.threads.v8 : Number.NaN;
  // Let the last abandoned requests finish on the server before the next window opens.
  await new Promise((resolve) => setTimeout(resolve, 200));
  return { run, serverCpu, mainCpu, v8Cpu, otherCpu };
}

/** CPU seconds all processes of the machine used so far (Linux /proc/stat, USER_HZ 100); NaN elsewhere. */
function machineCpuSeconds(): number {
  try {
    const fields = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!.trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal: everything but idle and iowait.
    const [user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0, steal = 0] = fields;
    return (user + nice + system + irq + softirq + steal) / 100;
  } catch {
    return Number.NaN;
  }
}
