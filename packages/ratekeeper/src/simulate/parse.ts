import { describeValue, RateLimitConfigError, type ConfigIssue } from "../core/errors.js";
import { TrafficBuilder, type Traffic } from "./traffic.js";

/** Options of {@link parseTraffic}. */
export interface ParseTrafficOptions {
  /** Named in errors and in the report, e.g. the file name. @default "traffic" */
  name?: string | undefined;
  /**
   * `csv`: `time,key[,cost]` lines; `access-log`: the Common or Combined Log Format that nginx
   * and Apache write (the key is the client address); `auto`: an access log if the first line
   * reads as one, else CSV.
   * @default "auto"
   */
  format?: "auto" | "csv" | "access-log" | undefined;
  /**
   * How CSV times that are plain numbers are read: `auto` takes numbers from 1e11 up as epoch
   * milliseconds and smaller ones as seconds (epoch seconds such as `1767225600.250`, or seconds
   * from the start such as `12.5`); `ms` and `s` force one unit.
   * @default "auto"
   */
  timeUnit?: "auto" | "ms" | "s" | undefined;
}

/** How many bad lines are listed before the error stops counting them one by one. */
const MAX_LISTED = 20;

// host ident user [time] "request" ...: the Common Log Format and the Combined one that extends it.
const ACCESS_RE = /^(\S+) \S+ \S+ \[([^\]]+)\] "/;
const CLF_TIME_RE = /^(\d{2})\/([A-Za-z]{3})\/(\d{4}):(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,3}))? ([+-])(\d{2})(\d{2})$/;
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const ISO_RE = /^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}/;
const NUMBER_RE = /^\d+(\.\d+)?$/;

/**
 * Reads traffic from the text of a CSV file or an access log, for {@link simulate}. Blank lines
 * and lines starting with `#` are skipped; the requests are sorted by time.
 *
 * CSV: `time,key` or `time,key,cost` per line, with an optional header naming the columns
 * (`time`/`timestamp`/`ts`, `key`/`client`/`ip`/`user`, `cost`/`weight`) in any order; fields
 * may be double-quoted. A time is ISO 8601 (`2026-01-01T12:00:00.250Z`) or a number (see `timeUnit`).
 * @throws RateLimitConfigError listing each bad line (up to 20) with its line number and field
 * @example parseTraffic("time,key\n1767225600000,alice\n1767225600250,bob\n", { name: "mine.csv" })
 */
export function parseTraffic(text: string, options: ParseTrafficOptions = {}): Traffic {
  const name = options.name ?? "traffic";
  const format = options.format ?? "auto";
  const timeUnit = options.timeUnit ?? "auto";
  const issues: ConfigIssue[] = [];
  if (typeof text !== "string") throw new RateLimitConfigError([{ path: name, message: `must be text (got ${describeValue(text)})` }]);
  if (!["auto", "csv", "access-log"].includes(format))
    issues.push({ path: "format", message: `must be "auto", "csv" or "access-log" (got ${describeValue(format)})` });
  if (!["auto", "ms", "s"].includes(timeUnit))
    issues.push({ path: "timeUnit", message: `must be "auto", "ms" or "s" (got ${describeValue(timeUnit)})` });
  if (issues.length > 0) throw new RateLimitConfigError(issues);
  const lines = text.split(/\r?\n/);
  const first = lines.find((l) => l.trim() !== "" && !l.startsWith("#")) ?? "";
  const log = format === "access-log" || (format === "auto" && ACCESS_RE.test(first));
  const b = new TrafficBuilder();
  let bad = 0;
  const fail = (line: number, field: string, message: string) => {
    if (++bad <= MAX_LISTED) issues.push({ path: `${name}:${line}: ${field}`, message });
  };
  if (log) readAccessLog(lines, b, fail);
  else readCsv(lines, b, timeUnit, fail);
  if (bad > MAX_LISTED) issues.push({ path: name, message: `${bad - MAX_LISTED} more bad lines not listed` });
  if (issues.length === 0 && b.size === 0)
    issues.push({ path: name, message: `has no requests (expected ${log ? "access log lines" : "CSV lines: time,key[,cost]"})` });
  if (issues.length > 0) throw new RateLimitConfigError(issues);
  // What the traffic is; its name and its count are printed beside it (table, report).
  return b.build(name, log ? "access log (key: client address)" : "CSV");
}

type Fail = (line: number, field: string, message: string) => void;

function readAccessLog(lines: string[], b: TrafficBuilder, fail: Fail): void {
  lines.forEach((line, i) => {
    if (line.trim() === "" || line.startsWith("#")) return;
    const m = ACCESS_RE.exec(line);
    if (!m) return fail(i + 1, "line", 'not an access log line (expected: host ident user [time] "request" ...)');
    const t = clfTime(m[2] as string);
    if (t === undefined)
      return fail(i + 1, "time", `not a time (got ${JSON.stringify(m[2])}; expected 10/Oct/2026:13:55:36 +0000 or ISO 8601)`);
    b.add(t, m[1] as string);
  });
}

/** `10/Oct/2026:13:55:36 -0700` (strftime `%d/%b/%Y:%H:%M:%S %z`, optionally with milliseconds), or ISO 8601. */
function clfTime(s: string): number | undefined {
  const m = CLF_TIME_RE.exec(s);
  if (!m) return ISO_RE.test(s) ? isoTime(s) : undefined;
  const month = MONTHS.indexOf(m[2] as string);
  if (month < 0) return undefined;
  const [day, year, h, min, sec] = [m[1], m[3], m[4], m[5], m[6]].map(Number) as [number, number, number, number, number];
  const ms = m[7] ? Number((m[7] + "00").slice(0, 3)) : 0;
  const offsetMin = (m[8] === "-" ? -1 : 1) * (Number(m[9]) * 60 + Number(m[10]));
  if (day < 1 || day > 31 || h > 23 || min > 59 || sec > 60) return undefined;
  return Date.UTC(year, month, day, h, min, sec, ms) - offsetMin * 60_000;
}

function isoTime(s: string): number | undefined {
  const t = Date.parse(s);
  return Number.isFinite(t) ? t : undefined;
}

function readCsv(lines: string[], b: TrafficBuilder, timeUnit: "auto" | "ms" | "s", fail: Fail): void {
  let cols = { time: 0, key: 1, cost: -1 };
  let headerSeen = false;
  lines.forEach((line, i) => {
    if (line.trim() === "" || line.startsWith("#")) return;
    const fields = splitCsv(line);
    if (fields === undefined) return fail(i + 1, "line", "has an unclosed double quote");
    if (!headerSeen) {
      headerSeen = true;
      const header = headerColumns(fields);
      if (header !== undefined) {
        if (typeof header === "string") return fail(i + 1, "header", header);
        cols = header;
        return;
      }
      cols.cost = fields.length >= 3 ? 2 : -1;
    }
    const timeText = (fields[cols.time] ?? "").trim();
    const key = fields[cols.key];
    const t = csvTime(timeText, timeUnit);
    if (t === undefined)
      return fail(i + 1, "time", `not a time (got ${JSON.stringify(timeText)}; use epoch milliseconds, seconds, or ISO 8601)`);
    if (key === undefined || key === "") return fail(i + 1, "key", "is missing (expected time,key[,cost])");
    let cost = 1;
    if (cols.cost >= 0 && (fields[cols.cost] ?? "").trim() !== "") {
      const text = (fields[cols.cost] as string).trim();
      cost = Number(text);
      if (!/^\d+$/.test(text) || cost < 1 || cost > 1_000_000_000)
        return fail(i + 1, "cost", `must be a whole number from 1 to 1000000000 (got ${JSON.stringify(text)})`);
    }
    b.add(t, key, cost);
  });
}

/** Column positions from a header line; undefined when the line is data; a message when it is a header missing a column. */
function headerColumns(fields: string[]): { time: number; key: number; cost: number } | string | undefined {
  const names = fields.map((f) => f.trim().toLowerCase());
  const find = (options: string[]) => names.findIndex((n) => options.includes(n));
  const time = find(["time", "timestamp", "ts", "t"]);
  const key = find(["key", "client", "ip", "user", "address"]);
  const cost = find(["cost", "weight"]);
  if (time < 0 && key < 0 && cost < 0) return undefined;
  if (time < 0) return "names no time column (time, timestamp or ts)";
  if (key < 0) return "names no key column (key, client, ip, user or address)";
  return { time, key, cost };
}

function csvTime(s: string, unit: "auto" | "ms" | "s"): number | undefined {
  if (NUMBER_RE.test(s)) {
    const v = Number(s);
    const ms = unit === "ms" || (unit === "auto" && v >= 1e11) ? v : v * 1000;
    return Number.isSafeInteger(Math.floor(ms)) ? ms : undefined;
  }
  return ISO_RE.test(s) ? isoTime(s) : undefined;
}

/** Splits one CSV line on commas; fields may be double-quoted, with `""` for a quote. Undefined on an unclosed quote. */
function splitCsv(line: string): string[] | undefined {
  if (!line.includes('"')) return line.split(",");
  const out: string[] = [];
  let i = 0;
  for (;;) {
    let field = "";
    if (line[i] === '"') {
      i++;
      for (;;) {
        const q = line.indexOf('"', i);
        if (q < 0) return undefined;
        field += line.slice(i, q);
        if (line[q + 1] === '"') {
          field += '"';
          i = q + 2;
        } else {
          i = q + 1;
          break;
        }
      }
      const comma = line.indexOf(",", i);
      field += line.slice(i, comma < 0 ? line.length : comma);
      i = comma < 0 ? line.length + 1 : comma + 1;
    } else {
      const comma = line.indexOf(",", i);
      field = line.slice(i, comma < 0 ? line.length : comma);
      i = comma < 0 ? line.length + 1 : comma + 1;
    }
    out.push(field);
    if (i > line.length) return out;
  }
}
