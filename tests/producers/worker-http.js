#!/usr/bin/env node
'use strict';
// A worker loop against `once serve` with nothing but fetch, as a team moving off a
// managed REST queue would write it:
//   ONCE_SERVE_TOKEN=... node worker-http.js --url http://HOST:PORT --queue NAME
//                                           --partner URL [--until-idle]
// consume (long polling) -> POST the reminder to the partner with an Idempotency-Key made
// of user, reminder and scheduled time -> ack after the partner accepted; nack (retry
// later) when it did not. A stale ack (409: the lease passed to another consumer) is
// not an error: the other consumer owns the message now. --until-idle: exit 0 when a
// long poll comes back empty. Prints "applied N, nacked M" and exits 0, or one line and 1.

const { parseArgs } = require('node:util');
const { call } = require('./http');

async function main() {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    strict: true,
    options: {
      url: { type: 'string' },
      queue: { type: 'string' },
      partner: { type: 'string' },
      'until-idle': { type: 'boolean', default: false },
    },
  });
  for (const required of ['url', 'queue', 'partner'])
    if (!values[required]) throw new Error(`--${required} is required`);
  let applied = 0;
  let nacked = 0;
  for (;;) {
    const answer = await call(values.url, '/v1/queue/consume', {
      queue: values.queue,
      max_messages: 10,
      visibility_timeout: 30,
      wait_seconds: 2,
    });
    if (answer.messages.length === 0) {
      if (values['until-idle']) break;
      continue;
    }
    for (const message of answer.messages) {
      const r = message.body;
      const key = [r.user_id, r.reminder_id, r.scheduled_at].map(encodeURIComponent).join(':');
      const sent = await fetch(values.partner, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': key },
        body: JSON.stringify(r),
      }).then(
        (response) => response.ok,
        () => false,
      );
      try {
        if (sent) {
          await call(values.url, '/v1/queue/ack', { queue: values.queue, message_id: message.id });
          applied++;
        } else {
          await call(values.url, '/v1/queue/nack', { queue: values.queue, message_id: message.id, delay_seconds: 1 });
          nacked++;
        }
      } catch (err) {
        if (err.status !== 409) throw err;
      }
    }
  }
  process.stdout.write(`applied ${applied}, nacked ${nacked}\n`);
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`worker-http.js: ${String(err && err.message ? err.message : err).replace(/\s*\n\s*/g, ' ')}\n`);
    process.exit(1);
  },
);
