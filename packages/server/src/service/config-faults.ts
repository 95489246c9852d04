/**
 * What the operator's configuration or stored data caused, as opposed to the client's request or
 * a store's failure: an override that admits less than its rule's cost, an override whose stored
 * policy the library refuses. The check is answered as well as the service can (it never blames
 * the client with a 400), and the service's log says what to fix, once per cause rather than once
 * per check: a flood of checks on such a key must not become a flood of log lines.
 */
import { randomBytes } from "node:crypto";

/** Where the decision service reports such faults: a pino logger fits. */
export interface ServiceLog {
  warn(obj: object, msg: string): void;
}

/**
 * Reports each fault once: per object it is about (an override as the overrides cache holds it,
 * one object per stored row, so a rewritten row is a new one) and per name (the rule, and its
 * cost). Held weakly: a row gone from the cache takes its entries with it.
 * @example const id = faults.once(override, "d/k\u00005", "override admits ...", () => ({ domain, key }));
 */
export class FaultLog {
  private readonly seen = new WeakMap<object, Map<string, string>>();

  constructor(private readonly log: ServiceLog | undefined) {}

  /**
   * The error id of the fault (`about`, `name`): made and logged, with `fields()` and `msg`, the
   * first time; the same id after. Answers that the fault shaped name it, so the log line is found.
   */
  once(about: object, name: string, msg: string, fields: () => object): string {
    let names = this.seen.get(about);
    if (names === undefined) {
      names = new Map();
      this.seen.set(about, names);
    }
    let id = names.get(name);
    if (id === undefined) {
      id = randomBytes(6).toString("hex");
      names.set(name, id);
      this.log?.warn({ ...fields(), errorId: id }, msg);
    }
    return id;
  }
}
