/**
 * isKeyValueError (stores/redis/client.ts) on the error texts of Redis 6 and 7, through ioredis
 * and node-redis alike (both pass Redis's text on): a key's value (WRONGTYPE, the script failing
 * on a value it did not write) is Redis answering; anything saying Redis cannot serve, even
 * wrapped in a script error, and any client-side connection error, is not (the breaker counts it).
 */
import { describe, expect, it } from "vitest";
import { isKeyValueError } from "../src/stores/redis/client.js";

const KEY_VALUE = [
  "WRONGTYPE Operation against a key holding the wrong kind of value script: 4035b913, on @user_script:391.",
  "ERR user_script:421: bad argument #2 to 'unpack' (data string too short) script: feec70fd, on @user_script:421.",
  "ERR value is not an integer or out of range script: 4035b913, on @user_script:391.",
  "ERR Error running script (call to f_4035b913): @user_script:391: WRONGTYPE Operation against a key holding the wrong kind of value",
];
const OUTAGE = [
  "OOM command not allowed when used memory > 'maxmemory'. script: 4035b913, on @user_script:391.",
  "ERR Error running script (call to f_4035b913): @user_script:391: @user_script: 391: -OOM command not allowed when used memory > 'maxmemory'.",
  "READONLY You can't write against a read only replica. script: 4035b913, on @user_script:391.",
  "ERR Error running script (call to f_4035b913): @user_script:391: -READONLY You can't write against a read only replica.",
  "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
  "LOADING Redis is loading the dataset in memory",
  "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk.",
  "CLUSTERDOWN The cluster is down",
  "TRYAGAIN Multiple keys request during rehashing of slot",
  "NOSCRIPT No matching script. Please use EVAL.",
  "NOAUTH Authentication required.",
  "ERR max number of clients reached",
  "Connection is closed.",
  "Stream isn't writeable and enableOfflineQueue options is false",
  "The client is closed",
  "connect ECONNREFUSED 127.0.0.1:6379",
  // Redis 7 gives a script's ACL, cluster and kill refusals as "ERR <text> script: ..., on
  // @user_script:N." with no code word: the first three were seen on redis-server 7.0.15, the
  // cluster ones are script.c's texts (scriptVerifyClusterState).
  "ERR The user executing the script can't run this command or subcommand script: 2b58b113, on @user_script:1.",
  "ERR The user executing the script can't access at least one of the keys mentioned in the command arguments script: c8a51c70, on @user_script:1.",
  "ERR Script killed by user with SCRIPT KILL... script: 653db1ce, on @user_script:1.",
  "ERR Script attempted to execute a command while the cluster is down script: 4035b913, on @user_script:391.",
  "ERR Script attempted to execute a write command while the cluster is down and readonly script: 4035b913, on @user_script:391.",
  "ERR Script attempted to access a non local key in a cluster node script: 4035b913, on @user_script:391.",
  // Redis 6 wraps the same refusals in "Error running script".
  "ERR Error running script (call to f_4035b913): @user_script:391: @user_script: 391: The user executing the script can't run this command or subcommand",
  "ERR Error running script (call to f_4035b913): @user_script:391: @user_script: 391: Lua script attempted to access a non local key in a cluster node",
  "ERR Error running script (call to f_4035b913): @user_script:391: Script killed by user with SCRIPT KILL...",
];

describe("isKeyValueError", () => {
  it.each(KEY_VALUE)("a key's value: %s", (msg) => expect(isKeyValueError(new Error(msg))).toBe(true));
  it.each(OUTAGE)("Redis cannot serve (counted by the breaker): %s", (msg) => expect(isKeyValueError(new Error(msg))).toBe(false));
});
