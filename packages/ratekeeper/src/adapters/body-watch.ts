/**
 * A response body watched for its end, for runtimes with no Node response to watch (Bun, Deno,
 * Cloudflare Workers, Hono's `app.request()`), where a streamed body is still in flight after the
 * handler has returned.
 */

/**
 * `body`, passed on chunk by chunk, calling `done` once, at the first of:
 * - it has been read to its end, or has failed;
 * - its reader cancels it (the runtimes cancel a response's body when the client goes away);
 * - nobody has asked for a chunk `unreadMs` after this call: the body was dropped unread and never
 *   cancelled (a middleware before ours answered with a Response of its own; Hono's `c.res`
 *   setter does not cancel the body it replaces). A runtime asks for the first chunk as soon as it
 *   has the response, so a body being sent is never taken for dropped; once reading has begun,
 *   only its end or a cancel calls `done` (a slow download keeps going as long as it takes).
 * The stream has no queue of its own (`highWaterMark: 0`): it reads from `body` only when asked, so
 * "asked" means a reader is there. A chunk asked for after `done` (a late reader) is still served.
 * @param unreadMs how long a body may wait for its first read; the timer does not keep the process alive
 */
export function untilDone(body: ReadableStream<Uint8Array>, done: () => void, unreadMs: number): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  let called = false;
  let unread: ReturnType<typeof setTimeout> | undefined;
  const once = (): void => {
    if (unread !== undefined) {
      clearTimeout(unread);
      unread = undefined;
    }
    if (called) return;
    called = true;
    done();
  };
  unread = setTimeout(once, unreadMs);
  (unread as { unref?: () => void }).unref?.();
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        if (unread !== undefined) {
          clearTimeout(unread);
          unread = undefined;
        }
        try {
          const chunk = await reader.read();
          if (chunk.done) {
            once();
            controller.close();
          } else controller.enqueue(chunk.value);
        } catch (e) {
          once();
          controller.error(e);
        }
      },
      cancel(reason) {
        once();
        return reader.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
}
