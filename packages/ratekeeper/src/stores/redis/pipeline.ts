/**
 * Writes the commands the store issues in one turn of the event loop to Redis together, as one
 * ioredis pipeline, instead of one socket write each. Each command is still its own command (one
 * script call per decision, each atomic); only the writes are shared.
 *
 * Why: with one write per command, Redis spends more CPU reading and answering each command than
 * running a small script (about 3 us of its CPU per command at 256 in flight on the benchmark
 * machine, against about 0.5 us when the commands arrive together; docs/benchmarks/redis.md).
 * Under load many decisions are issued in the same turn (every reply that arrives wakes a
 * request, which makes its next decision), so they go out in one write and come back in one.
 *
 * A turn's commands go out in chunks of {@link PIPELINE_CHUNK}: a chunk is written as soon as it
 * is full, the rest at the end of the turn. Holding a whole turn's commands back until its end made
 * the client and Redis take turns instead of working at once: at 256 decisions in flight the
 * client read 256 replies, issued 256 commands, then waited while Redis ran all of them, so each
 * cycle cost the client's CPU plus Redis's (fixed window, one script call per decision: 80-86k
 * decisions/s, p50 2.1-2.4 ms). With chunks of 32, Redis runs the first chunk while the client
 * still answers replies and issues the next ones (118-120k decisions/s, p50 1.1-1.2 ms), and
 * Redis still reads commands a chunk at a time (its CPU per decision did not rise).
 *
 * Only for an ioredis `Redis` (a `Cluster` pipeline must stay on one node; node-redis already
 * writes the commands of one turn together). The order of commands is kept.
 */

/** Commands written together at most, from one turn (see above; measured in docs/benchmarks/redis.md). */
export const PIPELINE_CHUNK = 32;

/** The part of an ioredis pipeline the store uses. */
interface PipelineLike {
  exec(): Promise<Array<[Error | null, unknown]> | null>;
}

/** An ioredis `Redis` with `pipeline()`. */
export interface PipeliningClient {
  pipeline(commands: Array<[string, ...Array<string | number>]>): PipelineLike;
  /** Sends one command (ioredis `Redis#call`-like); used when a turn issued only one. */
  [name: string]: unknown;
}

interface Queued {
  command: [string, ...Array<string | number>];
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

const defer: (fn: () => void) => void =
  typeof process === "object" && typeof process.nextTick === "function" ? (fn) => process.nextTick(fn) : queueMicrotask;

export class Pipeliner {
  private queue: Queued[] = [];
  private scheduled = false;
  private readonly flushNow = () => {
    this.scheduled = false;
    this.flush();
  };

  constructor(private readonly client: PipeliningClient) {}

  /** Queues `command` (ioredis method name, then its arguments) for this turn's write. */
  send(command: [string, ...Array<string | number>]): Promise<unknown> {
    return new Promise((resolve, reject) => {
      const n = this.queue.push({ command, resolve, reject });
      if (n >= PIPELINE_CHUNK) {
        // A full chunk goes now, so Redis can start on it while this turn goes on.
        this.flush();
      } else if (!this.scheduled) {
        this.scheduled = true;
        // After the current turn's callbacks and promise jobs: what was issued by then goes together.
        defer(this.flushNow);
      }
    });
  }

  private flush(): void {
    const q = this.queue;
    if (q.length === 0) return; // the end-of-turn flush after a turn that ended on a full chunk
    this.queue = [];
    if (q.length === 1) {
      const one = q[0] as Queued;
      const [name, ...args] = one.command;
      (this.client[name] as (...a: Array<string | number>) => Promise<unknown>).apply(this.client, args).then(one.resolve, one.reject);
      return;
    }
    this.client
      .pipeline(q.map((c) => c.command))
      .exec()
      .then(
        (results) => {
          for (let i = 0; i < q.length; i++) {
            const c = q[i] as Queued;
            const r = results?.[i];
            if (r === undefined) c.reject(new Error("Redis pipeline: no reply"));
            else if (r[0] !== null) c.reject(r[0]);
            else c.resolve(r[1]);
          }
        },
        (e: unknown) => {
          for (const c of q) c.reject(e);
        },
      );
  }
}
